"""dpctl.at: the dpctl/ commands on a dummy datapath."""
