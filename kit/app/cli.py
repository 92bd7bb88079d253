"""`python -m kit run | report | tasks | models | notebooks | simulate ...`."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
from pathlib import Path

from kit.app import cli_analysis
from kit.app.cli_analysis import _names, _width
from kit.errors import KitError
from kit.untrusted.terminal import visible


def _cmd_run(args: argparse.Namespace) -> int:
    from kit.run.progress import ExperimentState
    from kit.run.results import outcome_counts
    from kit.run.runner import run_experiment

    overrides = _overrides(args)
    if args.dry_run:
        from kit.run.dryrun import dry_run

        text = dry_run(
            args.experiment,
            results_dir=args.results,
            overrides=overrides,
            api_base=args.api_base,
            retry_errors=args.retry_errors,
            redo_changed=args.redo_changed,
            pilot=_pilot(args.pilot),
            detect=args.detect / 100,
        )
        print(text)
        return 0
    state = ExperimentState()
    try:
        out = run_experiment(
            args.experiment,
            results_dir=args.results,
            progress=not args.quiet,
            overrides=overrides,
            retry_errors=args.retry_errors,
            redo_changed=args.redo_changed,
            api_base=args.api_base,
            grace_s=args.grace,
            executor=args.executor,
            address=args.address,
            state=state,
        )
    except KeyboardInterrupt:  # the second Ctrl-C leaves runs executing: do not wait for them
        return _interrupted(abandon=state.in_flight > 0)
    errors = outcome_counts(out).get("error", 0)
    if errors:
        print(
            f"error: {errors} run(s) ended in outcome `error` (their messages are in the report: "
            f"python -m kit report {out})\n  -> fix the cause, then rerun just those: {_rerun(args)}",
            file=sys.stderr,
            flush=True,
        )
    capped = state.cap.message()
    if capped:
        print(f"stopped: {capped}", file=sys.stderr, flush=True)
    if not args.no_report:  # the tables first, the summary last: where the eyes are when it ends
        from kit.analysis.report import report

        print(report(out, "text", width=_width(None), summary_last=True), end="")
        print(
            f"one file to send (tables and figures): python -m kit report {out} --format html --out report.html"
        )
    print(f"results: {out}")
    if capped:
        print(f"stopped: {capped}")
    return 1 if errors else 3 if capped else 0


def _rerun(args: argparse.Namespace) -> str:
    """The command that reruns the errored runs: the user's own ``kit run`` command line (its --tasks,
    --strategies, --profile, --results ... shape which runs there are and where) with --retry-errors.
    With the experiment alone it would rerun the file's own tasks, into the default results folder."""
    argv = list(getattr(args, "argv", None) or ["run", str(args.experiment)])
    if "--retry-errors" not in argv:
        argv.append("--retry-errors")
    return visible(shlex.join(["python", "-m", "kit", *argv]))


def _overrides(args: argparse.Namespace) -> dict[str, object] | None:
    """The experiment fields the command line sets: --profile, --tasks, --strategies, --repeats,
    --sandbox, --sandbox-image."""
    out: dict[str, object] = {}
    if args.profile:
        out["profile"] = args.profile
    for name in ("tasks", "strategies"):
        items = _names(getattr(args, name), name)
        if items is not None:
            out[name] = items
    if args.repeats is not None:
        out["repeats"] = args.repeats
    if args.max_total_usd is not None:
        out["limits"] = {"max_total_usd": args.max_total_usd}
    for name in ("sandbox", "sandbox_image"):
        if getattr(args, name, None):
            out[name] = getattr(args, name)
    return out or None


def _pilot(folder: str | None) -> object:
    """The variance a pilot results folder shows (``--pilot``), for the dry run's power lines."""
    if folder is None:
        return None
    from kit.analysis.pilot import pilot_assumption

    return pilot_assumption(folder)


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags that shape the experiment from the command line (over the file's values)."""
    p.add_argument("--tasks", metavar="A,B", help="run these tasks (comma-separated ids or suite:NAME)")
    p.add_argument("--strategies", metavar="X,Y", help="run these strategies (comma-separated)")
    p.add_argument("--repeats", type=int, metavar="N", help="repeats per task x strategy")
    p.add_argument(
        "--max-total-usd",
        type=float,
        metavar="USD",
        help="experiment-wide cap: start no run once the spend so far plus the most the runs in flight and "
        "the new one can spend would pass it (limits.max_total_usd)",
    )
    p.add_argument(
        "--sandbox",
        choices=["bwrap", "podman", "docker", "none"],
        help="where commands run (over the experiment's `sandbox`); podman and docker need "
        "`python -m kit sandbox build-image` first (docs/sandbox.md)",
    )
    p.add_argument(
        "--sandbox-image", metavar="IMAGE", help="with podman or docker: the image (over `sandbox_image`)"
    )
    p.add_argument(
        "--api-base", metavar="URL", help="send every tier to this base URL (a proxy, a local or fake server)"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the matrix, the budget per run, the most it can spend and what would be kept, "
        "redone or run; write nothing",
    )
    p.add_argument(
        "--pilot",
        metavar="RESULTS",
        help="with --dry-run: take the variance of solved differences from this pilot experiment's results "
        "instead of the stated assumption",
    )
    p.add_argument(
        "--detect",
        type=float,
        default=10.0,
        metavar="POINTS",
        help="with --dry-run: the solved-rate difference (points) to say the tasks or repeats needed for",
    )
    p.add_argument(
        "--redo-changed",
        action="store_true",
        help="redo the finished runs whose settings (prompts, options, tiers, models, limits ...) changed",
    )


def _cmd_models_check(args: argparse.Namespace) -> int:
    from kit.config import load_profile
    from kit.model.check import check_profile, format_result

    _, sheet = load_profile(args.profile)
    result = check_profile(args.profile, records_dir=args.records, api_base=args.api_base)
    print(format_result(result, sheet.illustrative))
    return 0


def _cmd_docs(args: argparse.Namespace) -> int:
    from kit.app import reference, task_reference

    pages = [(reference.REFERENCE, reference), (task_reference.TASKS_REFERENCE, task_reference)]
    if args.check:
        stale = [path for path, page in pages if not page.is_current()]
        for path in stale:
            print(f"{path} is stale: run python -m kit docs", file=sys.stderr)
        return 1 if stale else 0
    for _, page in pages:
        print(f"wrote {page.write()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run an experiment (resumes: finished runs are skipped)")
    p.add_argument("experiment", help="experiments/NAME.yaml or NAME")
    p.add_argument(
        "--profile",
        help="override the experiment's profile: a name in datasets/profiles/ (local, scripted, tiered ...) "
        "or a path to a profile file",
    )
    _add_run_flags(p)
    p.add_argument("--results", type=Path, default=None, help="results folder (default results/)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-report", action="store_true", help="do not print the report at the end")
    p.add_argument("--retry-errors", action="store_true", help="also rerun runs whose outcome was error")
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="after Ctrl-C, how long runs in flight may go on before they stop (default 30)",
    )
    p.add_argument(
        "--executor",
        choices=["thread", "ray"],
        default="thread",
        help="thread: runs in this process (default); ray: each run as a Ray task (pip install -e '.[ray]')",
    )
    p.add_argument(
        "--address",
        default=None,
        help="with --executor ray: auto (the cluster of this node), ray://<head>:10001, or none for a local instance",
    )
    p.set_defaults(func=_cmd_run)

    cli_analysis.add_cli(sub)

    p = sub.add_parser("models", help="check the models of a profile")
    msub = p.add_subparsers(dest="models_command", required=True)
    c = msub.add_parser("check", help="call each tier twice with a shared prefix; show tokens and cost")
    c.add_argument("--profile", default="local")
    c.add_argument("--records", type=Path, default=None, help="folder for the calls (default: a temp folder)")
    c.add_argument(
        "--api-base", default=None, help="send every tier to this base URL (a proxy, a local or fake server)"
    )
    c.set_defaults(func=_cmd_models_check)

    p = sub.add_parser(
        "docs",
        help="regenerate docs/experiments.md and docs/tasks.md from the models (--check: are they current?)",
    )
    p.add_argument(
        "--check", action="store_true", help="exit 1 when a generated page is stale; write nothing"
    )
    p.set_defaults(func=_cmd_docs)

    from kit.app import sandbox_cli, simulate_cli, tasks_cli

    tasks_cli.add_cli(sub)
    sandbox_cli.add_cli(sub)
    simulate_cli.add_cli(sub)
    from kit.app import export_inspect  # inspect_ai itself is imported only when the command runs

    export_inspect.add_cli(sub)
    if importlib.util.find_spec("kit.app.notebooks") is not None:
        from kit.app import notebooks

        notebooks.add_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (the rerun hint quotes it)
    try:
        return int(args.func(args) or 0)
    except KitError as e:  # (its text may quote a repository's or an agent's: escaped)
        print(f"error: {visible(e, lines=True)}", file=sys.stderr)
        return 2
    except OSError as e:  # a file the kit had to read or write: one line, no traceback
        where = f": {e.filename}" if e.filename else ""
        print(f"error: {visible(e.strerror or e)}{visible(where)}", file=sys.stderr)
        return 2
    except RecursionError:  # Python 3.11's os.walk / rglob recurse: a folder of a task or clone nested
        # thousands deep (hostile input) -- one line, no traceback
        print(
            "error: a folder (or source) nests too deep for the kit to walk: refused\n"
            "  -> give a task folder or repository whose folders nest at most a few hundred levels",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return _interrupted(abandon=False)


def _interrupted(abandon: bool) -> int:
    """Exit status 130 after Ctrl-C. With ``abandon`` (runs still executing in worker threads, which
    the interpreter would wait for on exit) the process ends at once; those runs are left torn and
    redone by the next ``kit run``."""
    print(
        "interrupted: finished runs are kept; run the same command again to resume "
        "(interrupted and torn runs are redone)",
        file=sys.stderr,
    )
    if abandon:
        local = sys.modules.get("kit.model.embedded")
        if local is not None:
            local.stop_server()  # os._exit skips atexit, which would stop the embedded model
        quota = sys.modules.get("kit.sandbox.quota")
        if quota is not None:
            quota.release_all()  # nor would the clones' quota mounts be released
        throwaway = sys.modules.get("kit.sandbox.throwaway")
        if throwaway is not None:
            throwaway.release_all()  # nor the throwaway layers of the commands running
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return 130
