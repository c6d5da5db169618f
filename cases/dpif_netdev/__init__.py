"""dpif-netdev.at: the reproductions of upstream's dpif-netdev tests (on dummy ports), their sequences
and their per-combination ids."""
