"""Datapath throughput and efficiency: `./ovstest perf`.

One command measures what OVS developers otherwise piece together from
ovs_perf, vsperf and TRex/MoonGen: packets per second through the userspace
datapath on the port kinds this framework drives, against the ceiling of the
machine (the same traffic with OVS replaced by dpdk-testpmd), with the
datapath's own cycle counters and the CPU every thread used.

    perf/stats.py     medians, spread, the A/B noise band and its flag (pure)
    perf/records.py   samples, points and runs; perf.json and perf.csv (pure)
    perf/sysstat.py   CPU time per thread and per machine, from /proc
    perf/ovsstats.py  pmd-stats-show summed up (cycles/pkt, hit shares), dpctl/show -s
    perf/traffic.py   the flows, their frames and OpenFlow rules; the testpmd generator
    perf/kinds.py     the topologies: how each side wires its two ports
    perf/sides.py     a side: one switch with its ports and generator; parking, the window
    perf/ovsside.py   the side of an OVS build
    perf/ceiling.py   the ceiling's side: testpmd forwarding instead of OVS
    perf/sweep.py     the sweep: points, repeats, sides interleaved
    perf/plots.py     matplotlib figures
    perf/report.py    perf.html
    perf/plugin.py    pytest glue: the `perf` marker and options, the outputs at the end
"""
