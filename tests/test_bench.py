"""The benchmarks run end to end (on short timings); their figures are for bench/, not for tests."""

from bench import dispatch_cost


def test_dispatch_cost_measures_a_configuration_against_aten():
    config = next(c for c in dispatch_cost.CONFIGS if c.layers == ("schemas", "cpu", "autograd") and c.recording)
    row = dispatch_cost.measure(config, seconds=0.01, rounds=1)
    assert row["config"] == config.name and row["ours us"] > 0 and row["aten us"] > 0
    assert row["ratio"] == row["ours us"] / row["aten us"]  # one round: the ratio of its two timings


def test_dispatch_cost_times_every_python_entry_point():
    entries = dispatch_cost.entry_points(seconds=0.01)
    assert set(entries) >= {"torch.add", "torch.ops.aten.add.Tensor (overload)", "torch.ops.workbook.add (packet)"}
    assert all(micros > 0 for micros in entries.values())
