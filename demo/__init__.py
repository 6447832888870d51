"""`ibpool demo`: the closed loop on one machine, one command, no servers needed, and what it proved.

    ibpool demo [--fast] [--out DIR] [--seed N] [--quiet] [--real]   (python -m demo.cli ... works too)

One simulated day (`--fast`: six hours) on 16 nodes, two pools with day/night demand, a congestion episode
and a GPU falling off the bus, run by the real exporters, recommender and apply; then the run replayed
without the loop (its static twin) and each change without itself, and the shipped alert rules replayed by
vmalert. Deterministic for a seed, on one simulated clock. Modules, method and figures: docs/demo.md.
"""
