"""Packet evidence: pcap files, the field-by-field frame diff, tshark's second
opinion; no process control."""
