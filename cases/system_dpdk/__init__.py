"""system-dpdk.at: vhost-user ports with dpdk-testpmd as the guest, without a NIC."""
