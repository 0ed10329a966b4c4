"""``tools/upstream_tests.py``: the selection file, the sdist's hash, counting and judging.

All offline: the "index" is a local file, the "upstream suite" a few generated tests.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
SELECTION = Path(__file__).resolve().with_name("upstream") / "selection.toml"


@pytest.fixture(scope="module")
def up():
    spec = importlib.util.spec_from_file_location("upstream_tests", TOOLS / "upstream_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["upstream_tests"] = module
    spec.loader.exec_module(module)
    return module


def test_its_cache_variable_is_outside_vllms_namespace(up) -> None:
    """vLLM's environment check flags every VLLM_* name it does not define; the tool's
    variable is not one of them, so the plugin need not know it."""
    assert not up.CACHE_ENV.startswith("VLLM_")


GOOD = """
[sdist_sha256]
"9.9.9" = "ab"

[stand_in]
"org/tiny-llama" = "any small Llama"

[[group]]
name = "ir"
paths = ["tests/ir"]

[[group]]
name = "slow"
suite = "full"
paths = ["tests/v1/a.py", "tests/v1/b.py"]
plugins = ["tests/plugins/dummy"]

[[exclude]]
ids = ["tests/v1/a.py::test_model"]
class = "needs-model-download"
reason = "asks for org/big"

[[exclude]]
ids = ["tests/ir/test_op.py::test_x[2]"]
class = "known-failure-ours"
reason = "issue 99"
"""


def test_selection_is_parsed(up) -> None:
    s = up.parse_selection(GOOD)
    assert s.sdist_sha256 == {"9.9.9": "ab"}
    assert s.stand_ins == {"org/tiny-llama": "any small Llama"}
    assert [g.name for g in s.groups_for("ci")] == ["ir"]
    assert [g.name for g in s.groups_for("full")] == ["ir", "slow"]
    assert s.groups[1].plugins == ("tests/plugins/dummy",)
    assert [e.cls for e in s.known_failures()] == ["known-failure-ours"]


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD.replace('"needs-model-download"', '"too-slow"'), "class 'too-slow' is not one of"),
        (GOOD.replace('reason = "issue 99"', 'reason = " "'), "needs ids and a reason"),
        (GOOD.replace('suite = "full"', 'suite = "nightly"'), "suite must be one of"),
        (GOOD.replace('name = "slow"', 'name = "ir"'), "group names repeat"),
        (GOOD + "\n[extras]\n", "unknown top-level keys ['extras']"),
        ("[[group]\n", "not valid TOML"),
    ],
    ids=["class", "reason", "suite", "repeat", "key", "toml"],
)
def test_selection_mistakes_are_named(up, text: str, message: str) -> None:
    with pytest.raises(up.UpstreamError, match=message.replace("[", r"\[")):
        up.parse_selection(text)


@pytest.mark.parametrize(
    "entry, nodeid, expected",
    [
        ("tests/v1", "tests/v1/a.py::test_x", True),
        ("tests/v1", "tests/v1x/a.py::test_x", False),
        ("tests/v1/a.py", "tests/v1/a.py::T::test_x[1]", True),
        ("tests/v1/a.py", "tests/v1/a.py", True),  # an uncollectable file
        ("tests/a.py::test_x", "tests/a.py::test_x[cpu-1]", True),
        ("tests/a.py::test_x", "tests/a.py::test_x_other", False),
        ("tests/a.py::T", "tests/a.py::T::test_x", True),
        ("tests/a.py::test_x[1]", "tests/a.py::test_x[10]", False),
    ],
)
def test_ids_cover_paths_tests_and_parametrizations(up, entry, nodeid, expected) -> None:
    assert up.id_matches(entry, nodeid) is expected


def test_deselected_ids_are_those_of_the_group_and_not_known_failures(up) -> None:
    s = up.parse_selection(GOOD)
    ir, slow = s.groups
    assert up.exclusions_for(slow, s) == ["tests/v1/a.py::test_model"]
    assert up.exclusions_for(ir, s) == []  # its known failure runs, and must fail


def _tarball(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "src" / "vllm-9.9.9.tar.gz"
    path.parent.mkdir()
    with tarfile.open(path, "w:gz") as tar:
        for name in ("tests/ir/test_a.py", "examples/basic.py", "pyproject.toml", "vllm/x.py"):
            data = f"# {name}\n".encode()
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_with_another_hash_is_refused(up, tmp_path: Path) -> None:
    bad = tmp_path / "vllm-9.9.9.tar.gz"
    bad.write_bytes(b"not vllm")
    with pytest.raises(up.UpstreamError, match="damaged or not vLLM's release"):
        up.check_sha256(bad, "0" * 64)


def test_download_is_checked_then_cached(up, tmp_path: Path, monkeypatch) -> None:
    tarball, digest = _tarball(tmp_path)
    calls: list[str] = []

    def index(version: str, index: str) -> str:
        calls.append(version)
        return tarball.as_uri()

    monkeypatch.setattr(up, "sdist_url", index)
    cache = tmp_path / "cache"
    with pytest.raises(up.UpstreamError, match="damaged"):
        up.fetch_sdist("9.9.9", "1" * 64, cache)
    assert list(cache.iterdir()) == []  # the bad download is not kept
    got = up.fetch_sdist("9.9.9", digest, cache)
    assert got == cache / "vllm-9.9.9.tar.gz" and calls == ["9.9.9", "9.9.9"]
    assert up.fetch_sdist("9.9.9", digest, cache) == got and len(calls) == 2  # no network
    got.write_bytes(b"changed on disk")
    with pytest.raises(up.UpstreamError, match="delete it"):
        up.fetch_sdist("9.9.9", digest, cache)


def test_no_network_says_what_to_do(up, tmp_path: Path) -> None:
    with pytest.raises(up.UpstreamError, match="cannot reach the package index"):
        up.fetch_sdist("9.9.9", "0" * 64, tmp_path, index="http://127.0.0.1:9/simple")


def test_only_tests_examples_and_settings_are_extracted(up, tmp_path: Path) -> None:
    tarball, _ = _tarball(tmp_path)
    tree = up.extract_tests(tarball, tmp_path / "tree")
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert files == [".extracted", "examples/basic.py", "pyproject.toml", "tests/ir/test_a.py"]


def test_missing_vllm_is_named(up, monkeypatch) -> None:
    def version(dist: str) -> str:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(up.importlib.metadata, "version", version)
    with pytest.raises(up.UpstreamError, match="vLLM is not installed"):
        up.installed_vllm_version()


def test_counts_and_the_judgement(up) -> None:
    s = up.parse_selection(GOOD)
    outcomes = {
        "tests/ir/test_op.py::test_x[1]": "passed",
        "tests/ir/test_op.py::test_x[2]": "failed",  # listed
        "tests/ir/test_op.py::test_y": "skipped",
        "tests/v1/a.py::test_model": "excluded",
    }
    assert vars(up.count(outcomes)) == {"passed": 1, "failed": 1, "skipped": 1, "excluded": 1}
    assert up.judge(outcomes, s.known_failures(), ["tests/ir"]).ok

    worse = {**outcomes, "tests/ir/test_op.py::test_y": "failed"}
    assert up.judge(worse, s.known_failures(), ["tests/ir"]).unexpected_failures == [
        "tests/ir/test_op.py::test_y"
    ]
    fixed = {**outcomes, "tests/ir/test_op.py::test_x[2]": "passed"}
    assert up.judge(fixed, s.known_failures(), ["tests/ir"]).unexpected_passes == [
        "tests/ir/test_op.py::test_x[2]"
    ]
    gone = {k: v for k, v in outcomes.items() if "test_x[2]" not in k}
    assert up.judge(gone, s.known_failures(), ["tests/ir"]).stale == [
        "tests/ir/test_op.py::test_x[2]"
    ]
    assert up.judge(gone, s.known_failures(), ["tests/v1"]).ok  # not in this run's scope


def test_stand_in_names_resolve_offline_to_the_model(up, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    hub = up.stand_in_hub(model, ["org/tiny-llama", "gpt2"], tmp_path / "hub")
    from huggingface_hub import try_to_load_from_cache

    for name in ("org/tiny-llama", "gpt2"):
        found = try_to_load_from_cache(name, "config.json", cache_dir=hub)
        assert isinstance(found, str) and Path(found).samefile(model / "config.json")


def test_the_plugin_records_outcomes_and_deselects(up, tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        "import pytest\n"
        "def test_pass(): pass\n"
        "def test_fail(): assert False\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_out(n): assert False\n"
        "def test_skip(): pytest.skip('no')\n"
        "@pytest.fixture\n"
        "def broken():\n    yield\n    raise RuntimeError('teardown')\n"
        "def test_teardown(broken): pass\n"
    )
    (tests / "test_broken.py").write_text("import not_a_module\n")
    (tests / "test_gated.py").write_text(
        "import pytest\npytest.skip('no device', allow_module_level=True)\n"
    )
    (tests / "test_unlisted_broken.py").write_text("import not_a_module\n")
    exclude = tmp_path / "exclude.json"
    exclude.write_text(json.dumps(["tests/test_a.py::test_out", "tests/test_broken.py"]))
    report = tmp_path / "report.json"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(TOOLS),
        up.REPORT_ENV: str(report),
        up.EXCLUDE_ENV: str(exclude),
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", up.PLUGIN, "-p", "no:cacheprovider", "-q",
         "--continue-on-collection-errors", "tests"],
        cwd=tmp_path, env=env, capture_output=True, check=False,
    )  # fmt: skip
    assert json.loads(report.read_text()) == {
        "tests/test_a.py::test_pass": "passed",
        "tests/test_a.py::test_fail": "failed",
        "tests/test_a.py::test_out[1]": "excluded",
        "tests/test_a.py::test_out[2]": "excluded",
        "tests/test_a.py::test_skip": "skipped",
        "tests/test_a.py::test_teardown": "failed",
        "tests/test_broken.py": "excluded",
        "tests/test_gated.py": "skipped",
        "tests/test_unlisted_broken.py": "failed",
    }


def test_the_project_selection_is_valid(up) -> None:
    s = up.load_selection(SELECTION)
    assert {"0.32.0", "0.33.0"} <= set(s.sdist_sha256)
    assert all(len(h) == 64 for h in s.sdist_sha256.values())
    assert s.groups_for("ci")
    for group in s.groups:
        assert all(p.startswith("tests/") for p in group.paths), group


def _fake_run(up, monkeypatch, tmp_path: Path, outcomes: dict[str, str]) -> Path:
    """``main`` with the sdist, the model and the pytest runs replaced: ``outcomes`` per group."""
    selection = tmp_path / "selection.toml"
    selection.write_text(GOOD)
    monkeypatch.setattr(up, "installed_vllm_version", lambda: "9.9.9")
    monkeypatch.setattr(up, "fetch_sdist", lambda *a: tmp_path / "vllm-9.9.9.tar.gz")
    monkeypatch.setattr(up, "extract_tests", lambda sdist, dest: dest)
    monkeypatch.setattr(up, "stand_in_hub", lambda model, names, hub: hub)
    monkeypatch.setenv(up.CACHE_ENV, str(tmp_path / "cache"))
    import vllm_platform_template_tools.embedded_model as embedded

    monkeypatch.setattr(embedded, "ensure_model", lambda name, dest: dest)

    def run_group(group, selection, mode, device, tree, work, hub):
        return {n: o for n, o in outcomes.items() if up.in_paths(n, group.paths)}

    monkeypatch.setattr(up, "run_group", run_group)
    return selection


@pytest.mark.parametrize(
    ("x2", "expected"),
    [("failed", 0), ("passed", 1)],  # the listed known failure fails / now passes
)
def test_exit_status_follows_the_judgement(up, monkeypatch, tmp_path, x2, expected) -> None:
    outcomes = {"tests/ir/test_op.py::test_x[1]": "passed", "tests/ir/test_op.py::test_x[2]": x2}
    selection = _fake_run(up, monkeypatch, tmp_path, outcomes)
    out = tmp_path / "counts.json"
    argv = ["--selection", str(selection), "--mode", "both", "--json", str(out)]
    assert up.main(argv) == expected
    document = json.loads(out.read_text())
    counts = {"passed": 2 if x2 == "passed" else 1, "failed": 0 if x2 == "passed" else 1}
    assert document["template"]["counts"] == {**counts, "skipped": 0, "excluded": 0}
    assert document["stock"]["counts"] == document["template"]["counts"]


def test_an_unlisted_failure_fails_the_run_but_not_a_stock_run(up, monkeypatch, tmp_path) -> None:
    outcomes = {
        "tests/ir/test_op.py::test_x[2]": "failed",  # listed
        "tests/ir/test_new.py::test_z": "failed",  # not listed
    }
    selection = _fake_run(up, monkeypatch, tmp_path, outcomes)
    assert up.main(["--selection", str(selection)]) == 1
    assert up.main(["--selection", str(selection), "--mode", "stock"]) == 0


def test_a_group_that_ran_nothing_fails_the_run(up, monkeypatch, tmp_path) -> None:
    selection = _fake_run(up, monkeypatch, tmp_path, {})
    assert up.main(["--selection", str(selection), "--group", "ir"]) == 1


def test_usage_problems_exit_2(up, monkeypatch, tmp_path) -> None:
    selection = _fake_run(up, monkeypatch, tmp_path, {})
    monkeypatch.setattr(up, "installed_vllm_version", lambda: "1.0.0")  # no pinned sha256
    assert up.main(["--selection", str(selection)]) == 2
    selection.write_text('[[group]]\nname = "x"\n')  # no paths
    assert up.main(["--selection", str(selection)]) == 2


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_every_file_the_issue_names_is_in_a_group(up, version: str) -> None:
    """Each test file of tests/ir, tests/kernels/ir, tests/compile (but h100/) and the
    platform plugin tests lies in a group (where its tests run or are excluded by id)."""
    tree = up.cache_dir() / f"vllm-{version}"
    if not (tree / ".extracted").exists():
        pytest.skip(f"vLLM {version}'s tests are not extracted here (run tox -e upstream first)")
    paths = [p for g in up.load_selection(SELECTION).groups for p in g.paths]
    files = [
        str(f.relative_to(tree))
        for base in ("tests/ir", "tests/kernels/ir", "tests/compile")
        for f in (tree / base).rglob("test_*.py")
        if "/h100/" not in str(f)
    ] + ["tests/plugins_tests/test_platform_plugins.py"]
    assert len(files) > 40
    assert [f for f in files if not up.in_paths(f, paths)] == []
