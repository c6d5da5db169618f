"""Port kinds (netdev-dummy, tap and veth, DPDK, AF_XDP) behind one Port interface."""
