"""The runner: what the method stands on but is not the method. The command line and the
configs (config), the data as rows (data, store), the optimiser recipe (optim), the checkpoint
format (checkpoint), where output goes (outputs, guard), torchrun's process group (dist),
sampling at scale (shards), and evaluation's parts (metrics, reference, report, decompose)."""
