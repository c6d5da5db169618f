"""Ours: real port kinds (tap, veth, DPDK, vhost-user guests) and Linux as the tunnel peer, beyond
upstream."""
