"""kbagent.extract: candidates and ideas out of LLM replies."""

from __future__ import annotations

import pytest

from kbagent.extract import NO_CODE_BLOCK, NO_MODELNEW, TRUNCATED_FENCE, TRUNCATED_LENGTH, extract_code, extract_ideas

MODEL_V1 = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    version = 1\n"
MODEL_V2 = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    version = 2\n"


def fence(code: str, lang: str = "python", marker: str = "```") -> str:
    return f"{marker}{lang}\n{code}{marker}\n"


@pytest.mark.parametrize("lang", ["python", "py", "", "Python", "python3"])
def test_code_from_a_python_block(lang):
    reply = f"Here is my kernel.\n\n{fence(MODEL_V1, lang)}\nIt fuses the ops."
    result = extract_code(reply, "stop")
    assert result.ok and result.reason == ""
    assert result.code == MODEL_V1


def test_last_block_that_defines_modelnew_wins():
    helper = "def helper():\n    return 1\n"
    reply = f"First try:\n{fence(MODEL_V1)}\nBetter:\n{fence(MODEL_V2)}\nUsage:\n{fence(helper)}"
    assert extract_code(reply).code == MODEL_V2


def test_python_block_preferred_over_other_languages():
    cuda = "__global__ void k() {}\n// class ModelNew is built in Python below\nclass ModelNew {};\n"
    reply = f"{fence(MODEL_V1)}\n{fence(cuda, 'cpp')}"
    assert extract_code(reply).code == MODEL_V1
    # ... but a ModelNew in a mislabelled block is still better than nothing
    assert extract_code(fence(MODEL_V2, "cuda")).code == MODEL_V2


def test_tilde_fences_and_longer_fences_with_inner_backticks():
    inner = MODEL_V1 + 'DOC = """\n```\nnot a fence end\n```\n"""\n'
    assert extract_code(fence(inner, "python", "````")).code == inner
    assert extract_code(fence(MODEL_V1, "python", "~~~")).code == MODEL_V1


def test_indented_fence_inside_a_list_is_dedented():
    indented = "".join("   " + line if line.strip() else line for line in fence(MODEL_V1).splitlines(keepends=True))
    result = extract_code("1. The code:\n" + indented)
    assert result.code == MODEL_V1


def test_syntax_errors_are_not_rejected_here():
    broken = "class ModelNew(torch.nn.Module:\n    def forward(self x):\n"
    assert extract_code(fence(broken)).code == broken


def test_truncated_by_length():
    reply = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return"
    result = extract_code(reply, finish_reason="length")
    assert result.code is None and not result.ok
    assert result.reason == TRUNCATED_LENGTH == "truncated reply (finish_reason=length)"


def test_unclosed_fence_is_truncation_even_without_finish_reason():
    reply = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    result = extract_code(reply, finish_reason="stop")
    assert result.code is None
    assert result.reason == TRUNCATED_FENCE and result.reason.startswith("truncated reply")


def test_length_with_no_code_at_all_is_truncation():
    assert extract_code("Let me think about this step by step. First,", "length").reason == TRUNCATED_LENGTH


def test_complete_block_survives_a_truncated_tail():
    reply = fence(MODEL_V1) + "\nNow a second variant:\n```python\nclass ModelNew("
    assert extract_code(reply, "length").code == MODEL_V1


def test_no_code_block():
    result = extract_code("I cannot help with that.", "stop")
    assert result.code is None and result.reason == NO_CODE_BLOCK
    assert extract_code("", "stop").reason == NO_CODE_BLOCK


def test_code_block_without_modelnew():
    reply = fence("class Model(torch.nn.Module):\n    pass\n") + fence("x = 1\n", "")
    result = extract_code(reply, "stop")
    assert result.code is None and result.reason == NO_MODELNEW
    # "ModelNew" in a comment or another name is not a definition
    assert extract_code(fence("# class ModelNew goes here\nclass ModelNewer:\n    pass\n")).reason == NO_MODELNEW


def test_bare_python_reply_without_fences():
    assert extract_code(MODEL_V1, "stop").code == MODEL_V1
    # prose around it does not parse: not taken as code
    assert extract_code("Sure! " + MODEL_V1, "stop").reason == NO_CODE_BLOCK


# --- ideas ----------------------------------------------------------------------------------


def test_ideas_from_json_list():
    assert extract_ideas('["fuse relu", "use shared memory", "tile by 32"]', 10) == ["fuse relu", "use shared memory", "tile by 32"]


def test_ideas_from_fenced_json_with_prose_and_limit():
    reply = 'Here are my ideas:\n```json\n[\n  "  fuse   relu ",\n  "use shared memory",\n  "tile by 32"\n]\n```\nGood luck.'
    assert extract_ideas(reply, 2) == ["fuse relu", "use shared memory"]


def test_ideas_from_json_objects_and_wrapped_list():
    assert extract_ideas('[{"idea": "vectorize loads"}, {"description": "warp shuffle reduce"}]', 5) == [
        "vectorize loads",
        "warp shuffle reduce",
    ]
    assert extract_ideas('{"ideas": ["a", "b"]}', 5) == ["a", "b"]


def test_ideas_from_numbered_list_with_continuations():
    reply = (
        "Some thoughts first.\n\n"
        "1. **Fuse** the GEMM and the bias add\n"
        "   into one kernel epilogue.\n"
        "2) Use float4 loads\n"
        "   - align the pointers\n"
        "3. Tile by 64\n\n"
        "These should help."
    )
    assert extract_ideas(reply, 10) == [
        "**Fuse** the GEMM and the bias add into one kernel epilogue.",
        "Use float4 loads - align the pointers",
        "Tile by 64",
    ]


def test_ideas_from_bullets_deduplicated_and_limited():
    reply = "- fuse relu\n* Fuse  ReLU\n- cache weights\n\u2022 unroll\n- tile\n"
    assert extract_ideas(reply, 10) == ["fuse relu", "cache weights", "unroll", "tile"]
    assert extract_ideas(reply, 2) == ["fuse relu", "cache weights"]
    assert extract_ideas(reply, 0) == []


def test_no_ideas_in_prose():
    assert extract_ideas("I think you should write a faster kernel.", 5) == []
    assert extract_ideas("", 5) == []
    assert extract_ideas('["", "  "]', 5) == []
