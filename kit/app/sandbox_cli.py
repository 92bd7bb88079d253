"""``python -m kit sandbox build-image | check``: the container backends' image and a probe of a backend."""

from __future__ import annotations

import argparse

from kit.sandbox import images
from kit.sandbox.backends import CONTAINER_BACKENDS, check_available, get_sandbox


def cmd_build_image(args: argparse.Namespace) -> int:
    box = get_sandbox(args.sandbox)
    image, built = images.build_default(box, source=args.source, force=args.force)
    what = "built" if built else "up to date (its inputs are unchanged; --force builds it again)"
    print(f"{args.sandbox} image {image.name} ({image.id}): {what}")
    check_available(args.sandbox)
    print(f"checked: a command runs in it (`sandbox: {args.sandbox}` is ready)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    check_available(args.sandbox)
    print(f"sandbox {args.sandbox}: a command runs")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``sandbox`` and its subcommands on the kit's parser."""
    p = subparsers.add_parser("sandbox", help="build the container backends' image; check a sandbox")
    sub = p.add_subparsers(dest="sandbox_command", required=True)
    b = sub.add_parser(
        "build-image",
        help=f"build the kit's default image ({images.DEFAULT_IMAGE}) for podman or docker",
        description="host: from this machine's Debian packages and the kit's pytest, no registry needed; "
        "containerfile: from kit/sandbox/Containerfile (python:X.Y-slim), where a registry is reachable. "
        "Kept while its inputs are unchanged.",
    )
    b.add_argument(
        "--sandbox", choices=CONTAINER_BACKENDS, default="podman", help="the engine (default podman)"
    )
    b.add_argument("--from", dest="source", choices=["host", "containerfile"], default="host")
    b.add_argument("--force", action="store_true", help="build even when an image of the same inputs exists")
    b.set_defaults(func=cmd_build_image)
    c = sub.add_parser("check", help="run a probe command in a sandbox; says what to do when it cannot")
    c.add_argument("sandbox", help="bwrap, podman, docker (podman@IMAGE for another image)")
    c.set_defaults(func=cmd_check)
