"""alb.at: PMD auto load balance."""
