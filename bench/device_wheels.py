"""`make device-wheels`: the wheels a bare GPU image needs to run looprl, fetched while there is a network.

The GPU machines looprl is checked on have Python 3.12, torch (CUDA), transformers, tokenizers and
safetensors, but none of looprl's other dependencies and no network. This script writes into a folder
(`.device-wheels/`, git-ignored, carried to the machine) looprl's own wheel and every wheel pip would
install beside it into such an image, for cp312 manylinux x86_64; `bench/gpu_check.sh` installs them
there with `pip install --no-index --no-deps --target`.

What the image already holds is decided by pip itself, not by a hand-kept list: a throwaway venv of
the image's Python (`build/device-image-X.Y/`) gets the image's transformers, tokenizers, safetensors
and numpy, torch's own pure-Python requirements, and a metadata-only stand-in for torch (its CUDA wheel
and NVIDIA libraries are gigabytes, and a CPU needs none of them to resolve); `pip install --dry-run
--report` of looprl's wheel in that venv then names exactly what is missing. `--image-python` names an
existing environment to resolve against instead (the bootstrap test uses a bare venv). The download
itself pins those versions and asks for the image's platform tags, so the folder holds one wheel per
package and nothing that would shadow the image's torch or transformers.

The folder also gets `SOURCE`, a digest of `src/`: `gpu_check.sh` refuses wheels built from other code
(`--digest` prints the digest of the tree it is run in; stdlib only, so the bare image can run it).

    python bench/device_wheels.py --dest .device-wheels [--python-version 3.12] [--image-python PY]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGE_TORCH = "2.11.0"
IMAGE_TRANSFORMERS = "5.17.0"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
"""The image's glibc is at least 2.28 (torch's own CUDA wheels need it); older tags are what most wheels carry."""
LIMIT_MIB = 64
"""What travels to a lent GPU machine per call, wheels and working tree together."""
TORCH_BINARY_PREFIXES = ("nvidia-", "cuda-", "triton")
"""torch's requirements that are CUDA libraries or compilers: in the image, and never needed to resolve."""


def source_digest(root: Path = ROOT) -> str:
    """sha256 over every file under `src/` (path and bytes), bytecode caches and build metadata left out."""
    digest = hashlib.sha256()
    src = root / "src"
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        if "__pycache__" in rel or ".egg-info" in rel:
            continue
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH: a source tree on it (with the `looprl.egg-info` a wheel build leaves
    in `src/`) would make pip count looprl, and whatever else is there, as installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def pip(python: str, *args: str) -> None:
    """`python -m pip ARGS`, failing loudly."""
    subprocess.run([python, "-m", "pip", "--disable-pip-version-check", *args], check=True, env=clean_env())


def find_python(version: str) -> str:
    """An interpreter of the image's Python version: `pythonX.Y` on PATH (a pyenv shim may not run), else pyenv's."""
    candidates = [shutil.which(f"python{version}")]
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        candidates += [str(p) for p in sorted(Path(root).glob(f"versions/{version}.*/bin/python"), reverse=True)]
    for python in filter(None, candidates):
        if subprocess.run([python, "-c", ""], capture_output=True).returncode == 0:
            return python
    sys.exit(f"no Python {version} found (python{version} on PATH or pyenv's): pip must resolve with the image's "
             "Python, whose markers it evaluates")


def image_venv(version: str, torch_version: str, transformers_version: str) -> str:
    """A venv standing in for the GPU image (what pip must treat as already there); built once per versions."""
    venv = ROOT / "build" / f"device-image-{version}"
    python = str(venv / "bin" / "python")
    stamp = venv / ".image"
    wanted = f"torch=={torch_version} transformers=={transformers_version}"
    if stamp.is_file() and stamp.read_text() == wanted:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([find_python(version), "-m", "venv", str(venv)], check=True)
    pip(python, "install", "--quiet", "--upgrade", "pip")  # --report and metadata-only resolution need a recent pip
    with tempfile.TemporaryDirectory() as scratch:  # torch's metadata only (PEP 658): no multi-GB download
        report = Path(scratch) / "torch.json"
        pip(python, "install", "--quiet", "--dry-run", "--no-deps", "--ignore-installed", "--report", str(report),
            f"torch=={torch_version}")
        metadata = json.loads(report.read_text())["install"][0]["metadata"]
    requires = [r for r in metadata.get("requires_dist", []) if "extra ==" not in r
                and not r.lower().startswith(TORCH_BINARY_PREFIXES)]
    pip(python, "install", "--quiet", f"transformers=={transformers_version}", "tokenizers", "safetensors", "numpy",
        *requires)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, env=clean_env()).stdout.strip())
    info = site / f"torch-{torch_version}.dist-info"
    info.mkdir(exist_ok=True)
    lines = ["Metadata-Version: 2.1", "Name: torch", f"Version: {torch_version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("looprl device_wheels stand-in\n")
    (info / "RECORD").write_text("")
    stamp.write_text(wanted)
    return python


def build_looprl(dest: Path) -> Path:
    """looprl's own wheel (pure Python, its package data included)."""
    for old in dest.glob("looprl-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as scratch:
        pip(sys.executable, "wheel", "--quiet", "--no-deps", "--wheel-dir", scratch, str(ROOT))
        (built,) = Path(scratch).glob("looprl-*.whl")
        return Path(shutil.move(str(built), dest / built.name))


IMAGE_ROOTS = ("torch", "transformers", "tokenizers", "safetensors", "numpy")
"""What every image has, together with each one's own requirements (they import them)."""
CLOSURE = """
import json, sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canonical
def installed(names, stop):
    found, todo = {}, [Requirement(n) for n in names]
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if name in stop or name in found or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    return found
roots, wanted = json.loads(sys.argv[1]), json.loads(sys.argv[2])
direct = [Requirement(r) for root in roots for r in metadata.requires(root) or []]
direct = [r for r in direct if not r.marker or r.marker.evaluate({"extra": ""})]
stop = {canonical(r) for r in roots} | {canonical(r.name) for r in direct}
print(json.dumps(installed(wanted, stop)))
"""
"""Run by the image's interpreter: what of `wanted` (and their requirements) it holds beyond the roots and the
roots' direct requirements, `{name: version}`."""


def needed(image_python: str, wheel: Path) -> dict[str, str]:
    """`{name: version}` of every wheel to carry: what pip would install with looprl into the image's
    environment, and looprl's own requirements (and theirs) that the stand-in holds only because some
    package of the image asks for them through a longer chain (pydantic, through transformers ->
    huggingface-hub -> typer, is in the stand-in and not in the real image)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        pip(image_python, "install", "--quiet", "--dry-run", "--report", str(report), str(wheel))
        installs = json.loads(report.read_text())["install"]
    looprl = next(i for i in installs if i["metadata"]["name"] == "looprl")
    pins = {i["metadata"]["name"]: i["metadata"]["version"] for i in installs if i is not looprl}
    requires = [r for r in looprl["metadata"].get("requires_dist", []) if "extra ==" not in r]
    held = subprocess.run([image_python, "-c", CLOSURE, json.dumps(IMAGE_ROOTS), json.dumps(requires)], check=True,
                          capture_output=True, text=True, env=clean_env()).stdout
    return {**json.loads(held), **pins}


def download(dest: Path, pins: dict[str, str], version: str) -> None:
    """The pinned wheels for the image's interpreter and platform, and nothing else left in `dest`."""
    tags = [f for p in PLATFORMS for f in ("--platform", p)]
    pip(sys.executable, "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version", version,
        "--implementation", "cp", *tags, "--dest", str(dest), *(f"{n}=={v}" for n, v in sorted(pins.items())))
    keep = {_normal(n) for n in pins} | {"looprl"}
    for wheel in dest.glob("*.whl"):
        if _normal(wheel.name.split("-")[0]) not in keep:
            wheel.unlink()


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", type=Path, default=ROOT / ".device-wheels")
    parser.add_argument("--python-version", default="3.12", help="the image's Python (default: 3.12)")
    parser.add_argument("--image-python", help="an interpreter whose environment stands for the image "
                                               "(default: a venv with the image's torch and transformers)")
    parser.add_argument("--torch", default=IMAGE_TORCH, help=f"the image's torch (default {IMAGE_TORCH})")
    parser.add_argument("--transformers", default=IMAGE_TRANSFORMERS,
                        help=f"the image's transformers (default {IMAGE_TRANSFORMERS})")
    parser.add_argument("--digest", action="store_true", help="print the digest of src/ and exit")
    args = parser.parse_args()
    if args.digest:
        print(source_digest())
        return 0
    args.dest.mkdir(parents=True, exist_ok=True)
    image_python = args.image_python or image_venv(args.python_version, args.torch, args.transformers)
    wheel = build_looprl(args.dest)
    pins = needed(image_python, wheel)
    download(args.dest, pins, args.python_version)
    (args.dest / "SOURCE").write_text(source_digest() + "\n")
    wheels = sorted(args.dest.glob("*.whl"))
    mib = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{len(wheels)} wheels, {mib:.1f} MiB in {args.dest}: " + ", ".join(w.name.split("-")[0] for w in wheels))
    if mib >= LIMIT_MIB:
        print(f"over the {LIMIT_MIB} MiB a device call carries", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
