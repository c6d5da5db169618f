"""Ours: matrices beyond upstream (tunnel checksums, the tx offload product, edge frames, output
max_len, conntrack over offloads)."""
