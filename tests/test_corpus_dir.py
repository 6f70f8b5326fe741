"""benchmarks/corpus_dir.py: a folder of solution files (or of variant folders) matched to problems as --solutions is."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_dir.py"
_SPEC = importlib.util.spec_from_file_location("kb_benchmarks_corpus_dir", _PATH)  # benchmarks/ is no package
corpus_dir = sys.modules.setdefault(_SPEC.name, importlib.util.module_from_spec(_SPEC))  # dataclasses look it up there
_SPEC.loader.exec_module(corpus_dir)

_REF = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _dataset(tmp_path: Path) -> str:
    rows = [{"level": "3-metr", "problem_id": i, "name": f"{i}_{name}.py", "code": _REF} for i, name in ((1, "MLP"), (4, "LeNet5"))]
    path = tmp_path / "levels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_corpus_root_of_variants_is_matched_by_level_folder_and_name_and_strays_are_listed(tmp_path):
    root = tmp_path / "corpus"
    _write(root / "a" / "level3-metr" / "1_MLP.py", "# a\nfrom torch.utils.cpp_extension import load_inline\n")
    _write(root / "a" / "level3-metr" / "4_LeNet5.py", "import triton\n")
    _write(root / "a" / "level3-metr" / "7_Unknown.py", "x = 1\n")  # no such problem
    _write(root / "b" / "level3-metr" / "4_LeNet5.py", "# b\nimport torch\n")
    _write(root / "b" / "level1" / "1_MLP.py", "# level 1: the dataset has none\n")
    found = corpus_dir.folder_pairs(root, [_dataset(tmp_path)])
    assert [r.name for r in found.roots] == ["a", "b"]
    assert [(p.id, c.label, kind) for p, c, kind in found.pairs] == [
        ("L3-metr-1_MLP", "a/1_MLP.py", "cpp"), ("L3-metr-4_LeNet5", "a/4_LeNet5.py", "triton"),
        ("L3-metr-4_LeNet5", "b/4_LeNet5.py", "torch"),
    ]  # fmt: skip
    assert sorted(p.relative_to(root).as_posix() for p in found.unmatched) == ["a/level3-metr/7_Unknown.py", "b/level1/1_MLP.py"]


def test_one_solutions_folder_prefers_the_device_file_and_leaves_the_other_device_unmatched(tmp_path):
    folder = tmp_path / "solutions"
    _write(folder / "level3-metr" / "1_MLP.cuda.py", "# cuda\n")
    _write(folder / "level3-metr" / "1_MLP.py", "# plain\n")
    _write(folder / "level3-metr" / "4_LeNet5.cpu.py", "# cpu\n")
    found = corpus_dir.folder_pairs(folder, [_dataset(tmp_path)], "cuda")
    assert [(c.label, c.source) for _, c, _ in found.pairs] == [("1_MLP.cuda.py", "# cuda\n")]  # no folder prefix: one root
    assert sorted(p.name for p in found.unmatched) == ["1_MLP.py", "4_LeNet5.cpu.py"]


def test_a_folder_without_level_folders_is_a_one_line_error(tmp_path):
    _write(tmp_path / "x" / "1_MLP.py", "")
    with pytest.raises(SystemExit, match="no level folder"):
        corpus_dir.folder_pairs(tmp_path / "x", [_dataset(tmp_path)])
