"""Ours: throughput and efficiency (./ovstest perf, iperf3 through the datapath)."""
