"""The main job, ``python -m pymc_minibatch demo``, at a test size."""

from pymc_minibatch.__main__ import main


def test_demo_prints_the_comparison_and_writes_the_plot(tmp_path, capsys):
    output = tmp_path / "demo.png"
    argv = ["demo", "--n-rows", "2000", "--draws", "300", "--nuts-draws", "100", "--chains", "1",
            "--output", str(output)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ESS/s ratio TunaMH / NUTS" in printed and "beta[4]" in printed
    assert output.stat().st_size > 10_000


def test_usage_without_the_demo_word(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out
