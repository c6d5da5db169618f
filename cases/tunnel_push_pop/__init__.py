"""tunnel-push-pop.at and tunnel-push-pop-ipv6.at: the native tunnels' push and pop."""
