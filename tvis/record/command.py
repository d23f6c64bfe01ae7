"""`tvis run`: record the first optimizer steps of an unmodified training script."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from tvis.record.ranks import detect, parse_ranks, rank_run_dir, records_fully
from tvis.record.report import report
from tvis.store.format import FAILED
from tvis.store.rounding import MANTISSA_BITS

USAGE_ERROR = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps to record (3)")
    parser.add_argument(
        "--from-step",
        type=int,
        default=0,
        metavar="N",
        help="run unobserved until N optimizer steps are done, then record (0)",
    )
    parser.add_argument(
        "--watch",
        nargs="?",
        const="nan",
        metavar="nan,spike",
        help="watch every step lightly and record the first anomalous one in full: "
        "NaN/Inf (default), and with spike a loss or gradient-norm spike",
    )
    parser.add_argument(
        "--spike-factor",
        type=float,
        default=10.0,
        help="--watch spike: a spike is this many times the recent median (10)",
    )
    parser.add_argument(
        "--spike-window",
        type=int,
        default=100,
        help="--watch spike: the median is over this many recent steps (100)",
    )
    # A --watch run's re-run records into the watch run's folder (internal).
    parser.add_argument("--into", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--out",
        type=Path,
        help="runs folder (default tvis_runs beside the script, or in --project)",
    )
    parser.add_argument(
        "--project",
        type=Path,
        help="trace only code in this folder (default: the script's git work tree, else its "
        "folder, and any imported code outside installed packages)",
    )
    parser.add_argument("--samples", type=int, default=3, help="samples kept with values (3)")
    parser.add_argument(
        "--max-elems",
        type=int,
        default=2_000_000,
        help="values kept of a tensor without a batch dim",
    )
    parser.add_argument(
        "--param-elems",
        type=int,
        default=2_000_000,
        help="parameter elements kept with values (weight, gradient, Δw) per step (2000000)",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="store activations and gradients bit for bit (default: rounded to 10 mantissa "
        "bits, a relative error of at most 2^-11; NaN, Inf, statistics, inputs, labels, the "
        "loss, weights and their updates are always exact)",
    )
    parser.add_argument("--max-batches", type=int, default=64, help="stop after this many batches")
    parser.add_argument(
        "--max-bytes",
        type=_size,
        default=512 * 2**20,
        help="run size budget in binary units: 512M is 512 MiB (the default), 2G is 2 GiB",
    )
    parser.add_argument(
        "--no-functions", action="store_true", help="do not trace project functions"
    )
    parser.add_argument("--no-ops", action="store_true", help="do not record per-line op shapes")
    parser.add_argument("--no-gradcam", action="store_true", help="skip the Grad-CAM pass")
    parser.add_argument(
        "--no-attention",
        action="store_true",
        help="do not recompute fused attention weights (scaled_dot_product_attention)",
    )
    parser.add_argument(
        "--ranks",
        default="0",
        help="under torchrun/srun: ranks recorded in full, e.g. 0,3 or all (0); "
        "the others record statistics, losses and parameter norms only",
    )
    parser.add_argument("script", help="the training script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def _size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 512M") from None


def _problem(args: argparse.Namespace) -> str | None:
    """One sentence describing what is wrong with the command line, or None."""
    script = Path(args.script)
    if not script.exists():
        return f"{script} does not exist; pass the path of your training script."
    if script.is_dir():
        return (
            f"{script} is a directory; pass the training script inside it (e.g. {script}/train.py)."
        )
    try:
        parse_ranks(args.ranks)
    except ValueError as e:
        return f"{e}."
    for flag in ("steps", "samples", "max_elems", "param_elems", "max_batches", "max_bytes"):
        if getattr(args, flag) < 1:
            return f"--{flag.replace('_', '-')} must be at least 1 (got {getattr(args, flag)})."
    if args.from_step < 0:
        return f"--from-step must be 0 or more (got {args.from_step})."
    if args.watch is not None:
        from tvis.record.watch import parse_checks

        try:
            parse_checks(args.watch)
        except ValueError as e:
            return f"{e}."
        if args.from_step:
            return "--watch and --from-step do not go together; --watch finds the step itself."
        if args.spike_factor <= 1 or args.spike_window < 2:
            return "--spike-factor must be above 1 and --spike-window at least 2."
    return None


def prepare_argv(argv: list[str]) -> list[str]:
    """``--watch`` takes its checks only as ``--watch=nan,spike`` or a next word that is
    one (``--watch nan,spike``): otherwise argparse would take the script for its value
    and the script's own options for tvis's."""
    out = list(argv)
    start = out.index("run") + 1 if "run" in out else 0
    for i, word in enumerate(out[start:], start):
        if word.endswith(".py") or (not word.startswith("-") and Path(word).is_file()):
            break  # the script: what follows is the script's
        if word == "--watch":
            following = out[i + 1] if i + 1 < len(out) else ""
            if following and set(following.lower().split(",")) <= {"nan", "spike"}:
                out[i : i + 2] = [f"--watch={following}"]
            else:
                out[i] = "--watch=nan"
            break
    return out


def main(args: argparse.Namespace) -> int:
    problem = _problem(args)
    if problem:
        print(f"tvis: {problem}", file=sys.stderr)
        return USAGE_ERROR
    try:
        import torch  # noqa: F401
    except ImportError:
        print(
            "tvis: `tvis run` needs PyTorch in this environment (pip install torch); "
            "the viewer does not.",
            file=sys.stderr,
        )
        return USAGE_ERROR
    from tvis.record.builder import Settings
    from tvis.record.project import default_root
    from tvis.record.runner import record_script

    script = Path(args.script).resolve()
    project = (args.project or default_root(script)).resolve()
    out = (args.out or (args.project or script.parent) / "tvis_runs").resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".tvis-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as e:
        print(f"tvis: cannot write runs to {out} ({e.strerror}); pass --out DIR.", file=sys.stderr)
        return USAGE_ERROR
    settings = Settings(
        steps=args.steps,
        samples=args.samples,
        max_elems=args.max_elems,
        param_elems=args.param_elems,
        max_batches=args.max_batches,
        max_bytes=args.max_bytes,
        functions=not args.no_functions,
        ops=not args.no_ops,
        gradcam=not args.no_gradcam,
        attention=not args.no_attention,
        mantissa_bits=None if args.exact else MANTISSA_BITS,
    )
    if args.watch is not None:
        from tvis.record.watch_run import watch_script

        return watch_script(args, script, settings, project, out)
    rank = detect()
    run_dir, meta = None, {}
    if args.into is not None:
        from tvis.record.watch_run import rerun_meta

        run_dir, meta, check = args.into, *rerun_meta(args.into)
    else:
        check = None
    if args.from_step:
        meta["from_step"] = args.from_step
    if rank is not None:
        full = records_fully(rank, parse_ranks(args.ranks))
        settings.rank_digests = True
        if not full:
            settings = settings.light()
        run_dir = run_dir or rank_run_dir(out, script, rank, parse_ranks(args.ranks))
        meta.update({"rank": rank.record(), "full": full})
    try:
        outcome = record_script(
            script,
            list(args.args),
            settings,
            project,
            out,
            run_dir,
            meta,
            wide_project=args.project is None,
            from_step=args.from_step,
            check=check,
        )
    except OSError as e:  # the run folder itself could not be created
        print(
            f"tvis: cannot write the run to {out} ({e.strerror}); free space or pass --out DIR.",
            file=sys.stderr,
        )
        return USAGE_ERROR
    if outcome.exit_code == 130:  # Ctrl-C: another one while exiting has nothing to stop
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        report(outcome, rank)
    except OSError:
        pass  # the terminal is gone (SIGHUP from a dropped ssh session): the run is saved
    if outcome.signal is not None:
        from tvis.record.signals import die_of

        die_of(outcome.signal)
    watched = (meta.get("watch") or {}).get("anomaly") or {}
    if watched.get("kind") in ("loss_nonfinite", "grad_nonfinite") and not outcome.anomalies:
        print(
            f"tvis: the re-run recorded step {watched['step']} without the watch run's "
            f"anomaly ({watched['text']}): the script does not repeat itself exactly.",
            file=sys.stderr,
        )
    misplaced = misplaced_options(list(args.args))
    if misplaced and outcome.status == FAILED and outcome.batches == 0:
        # The script most likely refused them: say where tvis's own options go.
        them = "them" if len(misplaced) > 1 else "it"
        print(
            f"tvis: {', '.join(misplaced)} came after {args.script}, so the script got {them}; "
            f"tvis's options go before the script: tvis run {' '.join(misplaced)} … "
            f"{args.script} …",
            file=sys.stderr,
        )
    return outcome.exit_code


def misplaced_options(script_args: list[str]) -> list[str]:
    """The options of `tvis run` itself among the script's arguments (they came after the
    script, so argparse handed them to it)."""
    parser = _Flags()
    configure(parser)
    return [a.split("=", 1)[0] for a in script_args if a.split("=", 1)[0] in parser.flags]


class _Flags(argparse.ArgumentParser):
    """Notes the option strings ``configure`` declares."""

    def __init__(self) -> None:
        super().__init__(add_help=False)
        self.flags: set[str] = set()

    def add_argument(self, *names, **kwargs):
        self.flags.update(n for n in names if n.startswith("-"))
        return super().add_argument(*names, **kwargs)
