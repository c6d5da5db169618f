"""pmd.at: PMD threads, rx queues, pinning and sleep."""
