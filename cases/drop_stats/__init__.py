"""drop-stats.at: the datapath's drop reasons and their coverage counters."""
