"""kbagent.llm: the litellm client (through litellm's real client against a local fake OpenAI
server, no key, no network beyond 127.0.0.1), the scripted LLM and make_llm."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import types

import pytest
from fake_openai import FakeOpenAIServer, Hang, Reply, Status

from helpers import closed_port_url, drop_credentials
from kbagent import llm as llm_mod
from kbagent import preflight
from kbagent.llm import SCRIPTS, LiteLLMClient, LLMReply, LLMSettings, ScriptedLLM, backoff_s, make_llm, retry_after_s
from kbagent.preflight import SetupError, check_cost_cap, check_llm

KEY = "sk-test-secret"
MESSAGES = [{"role": "system", "content": "You write CUDA kernels."}, {"role": "user", "content": "Make it fast."}]


def settings_for(server: FakeOpenAIServer, **overrides) -> LLMSettings:
    values = {"model": "openai/fake-model", "api_base": server.base_url, "api_key": KEY, "timeout": 10.0, "max_retries": 2, "backoff": 0.05}
    values.update(overrides)
    return LLMSettings(**values)


def complete(settings: LLMSettings, messages=MESSAGES) -> tuple[LLMReply, float]:
    llm_mod._litellm()  # its first import takes seconds on a busy machine: not part of the call's time
    started = time.monotonic()
    reply = asyncio.run(LiteLLMClient(settings).complete(messages))
    return reply, time.monotonic() - started


def assert_no_key(reply: LLMReply) -> None:
    assert KEY not in json.dumps(reply.to_dict())
    assert KEY not in (reply.error or "")


# --- the real client against the fake server -----------------------------------------------


def test_normal_reply(capfd, caplog):
    with FakeOpenAIServer([Reply("```python\nclass ModelNew: ...\n```", prompt_tokens=123, completion_tokens=45)]) as server:
        settings = settings_for(server, temperature=0.3, max_tokens=777)
        reply, _ = complete(settings)
    assert reply.ok and reply.error is None
    assert reply.text == "```python\nclass ModelNew: ...\n```"
    assert reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens) == (123, 45)
    assert reply.attempts == 1
    assert isinstance(reply.cost_usd, float) and reply.cost_usd >= 0.0
    assert reply.latency_s > 0
    assert reply.model == "openai/fake-model"
    # what the server got: one request, the key as a bearer token, our messages and knobs
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    body = request["json"]
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES
    assert body["temperature"] == 0.3 and body["max_tokens"] == 777
    # the key goes nowhere else
    assert_no_key(reply)
    assert KEY not in json.dumps(settings.public()) and settings.public()["api_key"] == "***"
    assert LLMSettings(model="m").public()["api_key"] is None
    out, err = capfd.readouterr()
    assert KEY not in out + err + caplog.text
    assert LLMReply.from_dict(reply.to_dict()) == reply


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_then_success(status):
    with FakeOpenAIServer([Status(status, retry_after=0), "second time lucky"]) as server:
        reply, elapsed = complete(settings_for(server))
    assert reply.ok, reply.error
    assert reply.text == "second time lucky"
    assert reply.attempts == 2 and len(server.requests) == 2  # no hidden SDK retries
    assert elapsed < 5


def test_retry_after_header_is_honoured():
    with FakeOpenAIServer([Status(429, retry_after=1), "ok"]) as server:
        reply, elapsed = complete(settings_for(server, backoff=0.01))
    assert reply.ok and reply.attempts == 2
    assert elapsed >= 0.9  # waited what the server asked, not the 10 ms backoff


def test_retries_exhausted():
    with FakeOpenAIServer([Status(500)]) as server:
        reply, _ = complete(settings_for(server, max_retries=2))
    assert not reply.ok and reply.text == ""
    assert reply.attempts == 3 and len(server.requests) == 3
    assert "InternalServerError" in reply.error and "3 attempts" in reply.error
    assert "\n" not in reply.error and len(reply.error) <= 400


@pytest.mark.parametrize("status, name", [(401, "AuthenticationError"), (400, "BadRequestError"), (404, "NotFoundError")])
def test_client_errors_are_not_retried(status, name, capfd, caplog):
    with FakeOpenAIServer([Status(status), "never reached"]) as server:
        reply, _ = complete(settings_for(server, max_retries=3))
    assert not reply.ok and reply.text == ""
    assert reply.attempts == 1 and len(server.requests) == 1
    assert name in reply.error
    assert_no_key(reply)
    out, err = capfd.readouterr()
    assert KEY not in out + err + caplog.text


def test_key_in_a_server_message_is_redacted():
    message = f"Incorrect API key provided: {KEY}.\nYou can find your key at https://example.invalid."
    with FakeOpenAIServer([Status(401, message=message)]) as server:
        reply, _ = complete(settings_for(server))
    assert reply.error is not None and "Incorrect API key provided: ***" in reply.error
    assert "\n" not in reply.error
    assert_no_key(reply)


def test_hanging_server_times_out():
    with FakeOpenAIServer([Hang(60)]) as server:
        reply, elapsed = complete(settings_for(server, timeout=1, max_retries=1))
        assert len(server.requests) == 2
    assert not reply.ok and reply.attempts == 2
    assert "timeout" in reply.error.lower()
    assert elapsed < 15


def test_hang_then_answer():
    with FakeOpenAIServer([Hang(60), "awake"]) as server:
        reply, _ = complete(settings_for(server, timeout=1, max_retries=1))
    assert reply.ok and reply.text == "awake" and reply.attempts == 2


def test_connection_refused_is_retried_then_reported():
    with FakeOpenAIServer(["unused"]) as server:
        settings = settings_for(server, max_retries=1)
    reply, elapsed = complete(settings)  # the server is gone: nothing listens on its port
    assert not reply.ok and reply.attempts == 2
    assert "connection" in reply.error.lower()
    assert elapsed < 10


def test_hard_timeout_guards_a_hung_client(monkeypatch):
    import litellm

    calls = []

    async def never_returns(**kwargs):
        calls.append(kwargs)
        await asyncio.sleep(3600)

    monkeypatch.setattr(litellm, "acompletion", never_returns)
    monkeypatch.setattr(llm_mod, "HARD_TIMEOUT_SLACK_S", 0.1)
    settings = LLMSettings(model="openai/x", api_key=KEY, timeout=0.2, max_retries=1, backoff=0.01)
    reply, elapsed = complete(settings)
    assert not reply.ok and reply.attempts == 2 and len(calls) == 2
    assert "timeout" in reply.error
    assert elapsed < 3
    # what we asked litellm for: our own retries only, the per-attempt timeout
    assert calls[0]["num_retries"] == 0 and calls[0]["timeout"] == 0.2 and calls[0]["api_key"] == KEY


def test_length_finish_reason_is_recorded():
    with FakeOpenAIServer([Reply("```python\nclass ModelNew(", finish_reason="length")]) as server:
        reply, _ = complete(settings_for(server))
    assert reply.ok and reply.finish_reason == "length"
    assert reply.text.startswith("```python")


def test_empty_reply_is_an_error():
    with FakeOpenAIServer([Reply("", completion_tokens=0)]) as server:
        reply, _ = complete(settings_for(server))
    assert not reply.ok and reply.error.startswith("empty reply")
    assert reply.attempts == 1 and len(server.requests) == 1


# --- backoff arithmetic -----------------------------------------------------------------------


def test_backoff_doubles_with_jitter_and_is_capped():
    settings = LLMSettings(model="m", backoff=2.0)
    for retry, base in [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0)]:
        waits = [backoff_s(settings, retry) for _ in range(50)]
        assert all(0.75 * base <= w <= 1.25 * base for w in waits)
        assert len(set(waits)) > 1  # jitter
    assert all(backoff_s(settings, 10) <= 60.0 for _ in range(50))


def fake_exc(headers):
    exc = Exception("429")
    exc.response = types.SimpleNamespace(headers=headers)
    return exc


def test_retry_after_parsing_and_cap():
    settings = LLMSettings(model="m", backoff=2.0)
    assert retry_after_s(fake_exc({"Retry-After": "7"})) == 7.0
    assert retry_after_s(fake_exc({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(fake_exc({"content-type": "application/json"})) is None
    assert retry_after_s(Exception("no response")) is None
    http_date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= retry_after_s(fake_exc({"Retry-After": http_date})) <= 31
    assert backoff_s(settings, 1, fake_exc({"Retry-After": "3"})) == 3.0
    assert backoff_s(settings, 1, fake_exc({"Retry-After": "3600"})) == 60.0


# --- ScriptedLLM ------------------------------------------------------------------------------


def run_all(llm, n: int) -> list[LLMReply]:
    async def go():
        return [await llm.complete([{"role": "user", "content": f"call {i}"}]) for i in range(n)]

    return asyncio.run(go())


def test_scripted_list_in_order_then_last_repeated():
    llm = ScriptedLLM(["first", "second"])
    replies = run_all(llm, 4)
    assert [r.text for r in replies] == ["first", "second", "second", "second"]
    assert all(r.ok and r.finish_reason == "stop" and r.cost_usd == 0.0 and r.attempts == 1 for r in replies)
    assert [c[0]["content"] for c in llm.calls] == ["call 0", "call 1", "call 2", "call 3"]
    assert replies[0].prompt_tokens == len("call 0") // 4 and replies[0].completion_tokens == len("first") // 4
    assert replies[0].model == "scripted"


def test_scripted_items_replies_and_exceptions():
    truncated = LLMReply(text="```python\nclass Mo", finish_reason="length", model="x")
    llm = ScriptedLLM([truncated, RuntimeError("rate limited (429)"), TimeoutError, "", "fine"])
    replies = run_all(llm, 5)
    assert replies[0] is truncated
    assert replies[1].error == "rate limited (429)" and replies[1].text == ""
    assert replies[2].error == "TimeoutError"
    assert replies[3].error == "empty reply"
    assert replies[4].ok and replies[4].text == "fine"
    assert len(llm.calls) == 5


def test_scripted_callable_sees_the_messages():
    llm = ScriptedLLM(lambda messages: "echo: " + messages[-1]["content"], model="scripted/echo")
    replies = run_all(llm, 2)
    assert [r.text for r in replies] == ["echo: call 0", "echo: call 1"]
    assert llm.settings.model == "scripted/echo" and len(llm.calls) == 2


def test_scripted_needs_a_reply():
    with pytest.raises(ValueError):
        ScriptedLLM([])


# --- make_llm -----------------------------------------------------------------------------------


def test_make_llm_named_script(monkeypatch):
    monkeypatch.setitem(SCRIPTS, "echo-test", lambda messages: "echo " + messages[-1]["content"])
    settings = LLMSettings(model="scripted/echo-test", temperature=0.1)
    llm = make_llm(settings)
    assert isinstance(llm, ScriptedLLM) and llm.settings is settings
    assert run_all(llm, 1)[0].text == "echo call 0"


def test_make_llm_scripted_json_file(tmp_path):
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(["one", "two"]))
    llm = make_llm(LLMSettings(model=f"scripted/{path}"))
    assert isinstance(llm, ScriptedLLM)
    assert [r.text for r in run_all(llm, 3)] == ["one", "two", "two"]


def test_make_llm_bad_scripted_models(tmp_path):
    with pytest.raises(ValueError, match=r"unknown scripted model 'scripted/nope'.*scripted/<path") as info:
        make_llm(LLMSettings(model="scripted/nope"))
    assert "\n" not in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="list of reply strings"):
        make_llm(LLMSettings(model=f"scripted/{bad}"))
    with pytest.raises(ValueError, match="missing.json"):
        make_llm(LLMSettings(model=f"scripted/{tmp_path / 'missing.json'}"))


def test_make_llm_real_models_go_to_litellm():
    for model in ("openai/gpt-4o", "gemini/gemini-2.5-flash", "anthropic/claude-sonnet-4-5"):
        settings = LLMSettings(model=model, api_key=KEY)
        llm = make_llm(settings)
        assert isinstance(llm, LiteLLMClient) and llm.settings is settings


def test_importing_kbagent_llm_does_not_import_litellm():
    code = "import sys, kbagent.llm, kbagent.extract; assert 'litellm' not in sys.modules, 'litellm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- the fake server's own bounds -------------------------------------------------------------


def post(url: str, payload: dict) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    data = json.dumps(payload).encode()
    request = urllib.request.Request(url + "/chat/completions", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_fake_server_is_bounded():
    with FakeOpenAIServer(["a", Status(429, retry_after=2)], max_requests=2) as server:
        status, body = post(server.base_url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and body["choices"][0]["message"]["content"] == "a"
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
        assert post(server.base_url, {"model": "m", "messages": []})[0] == 429
        assert post(server.base_url, {"model": "m", "messages": []})[0] == 503  # over max_requests
    started = time.monotonic()
    with FakeOpenAIServer(["a"], lifetime=0.2) as server:
        time.sleep(0.5)
        with pytest.raises(OSError):
            post(server.base_url, {"model": "m", "messages": []})
    assert time.monotonic() - started < 3


def test_the_key_is_not_in_the_settings_repr():
    settings = LLMSettings(model="openai/x", api_key="sk-test-secret")
    assert "sk-test-secret" not in repr(settings) and "sk-test-secret" not in str(settings)


# --- prices given on the command line ----------------------------------------------------------


def test_given_prices_set_the_cost_of_a_litellm_call():
    with FakeOpenAIServer([Reply("priced", prompt_tokens=1000, completion_tokens=2000)]) as server:
        priced, _ = complete(settings_for(server, price_in=3.0, price_out=15.0))
        unpriced, _ = complete(settings_for(server))
    assert priced.ok and (priced.prompt_tokens, priced.completion_tokens) == (1000, 2000)
    assert priced.cost_usd == pytest.approx((1000 * 3.0 + 2000 * 15.0) / 1e6)
    assert unpriced.ok and unpriced.cost_usd == 0.0  # litellm has no price for openai/fake-model


def test_given_prices_charge_the_scripted_models_tokens():
    settings = LLMSettings(model="scripted/x", price_in=2.0, price_out=10.0)
    reply = run_all(ScriptedLLM(["x" * 400], settings=settings), 1)[0]
    assert reply.completion_tokens == 100 and reply.prompt_tokens == len("call 0") // 4
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 2.0 + 100 * 10.0) / 1e6)
    assert run_all(ScriptedLLM(["x" * 400]), 1)[0].cost_usd == 0.0


# --- preflight: the checks before the first call ----------------------------------------------


@pytest.fixture
def no_keys(monkeypatch):
    drop_credentials(monkeypatch)


def setup_error(settings: LLMSettings) -> str:
    with pytest.raises(SetupError) as info:
        check_llm(settings)
    message = str(info.value)
    assert "\n" not in message and KEY not in message
    return message


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("gemini/gemini-2.5-pro", "no credentials for gemini: litellm finds no GOOGLE_API_KEY or GEMINI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "litellm finds no ANTHROPIC_API_KEY"),
        ("openai/gpt-4o", "litellm finds no OPENAI_API_KEY"),
    ],
)
def test_preflight_missing_key_names_the_variable_and_the_option(no_keys, model, says):
    message = setup_error(LLMSettings(model=model))
    assert says in message and "--api-key" in message and "KBAGENT_API_KEY" in message
    litellm = llm_mod._litellm()
    provider, _ = preflight._provider(litellm, LLMSettings(model=model))
    preflight._credentials(litellm, LLMSettings(model=model, api_key=KEY), provider)  # a key given: the credentials pass


def test_preflight_a_key_in_the_environment_is_enough(no_keys, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    preflight._credentials(llm_mod._litellm(), LLMSettings(model="gemini/gemini-2.5-pro"), "gemini")


@pytest.mark.parametrize(
    ("model", "says"),
    [("foo/bar-9", "litellm knows no provider 'foo'"), ("gemni/gemini-2.5-pro", "(did you mean gemini?)"), ("bar-9", "no provider in it")],
)
def test_preflight_unknown_provider(no_keys, model, says):
    message = setup_error(LLMSettings(model=model, api_key=KEY))
    assert says in message and "write PROVIDER/MODEL" in message


def test_preflight_scripted_models_need_nothing(no_keys):
    check_llm(LLMSettings(model="scripted/reference"))


def test_preflight_api_base_reachable_passes_closed_port_fails_fast(no_keys):
    with FakeOpenAIServer(["OK"]) as server:
        check_llm(settings_for(server, temperature=0.3))
        assert len(server.gets) == 1 and server.gets[0]["path"] == "/v1/models"
        assert server.gets[0]["headers"]["authorization"] == f"Bearer {KEY}"
        (sent,) = server.requests  # one completion of one token, as the search asks them
        assert sent["path"] == "/v1/chat/completions" and sent["json"]["max_tokens"] == 1 and sent["json"]["temperature"] == 0.3
        assert sent["json"]["model"] == "fake-model" and sent["headers"]["authorization"] == f"Bearer {KEY}"
    started = time.monotonic()
    message = setup_error(LLMSettings(model="openai/fake-model", api_base=closed_port_url(), api_key=KEY))
    assert "nothing answers there" in message and "start the server or fix the URL" in message
    assert time.monotonic() - started < preflight.CONNECT_TIMEOUT_S + 2


def test_preflight_api_base_needs_a_key_for_openai_models(no_keys):
    with FakeOpenAIServer(["never asked"]) as server:
        message = setup_error(settings_for(server, api_key=None))
        assert server.requests == []
    assert "OPENAI_API_KEY" in message and "--api-key none" in message


def test_preflight_api_base_model_list_catches_an_unknown_model(no_keys):
    with FakeOpenAIServer(["OK"], models=["served-a", "served-b"]) as server:
        check_llm(settings_for(server, model="openai/served-b"))
        message = setup_error(settings_for(server, model="openai/served-c"))
        assert [r["json"]["model"] for r in server.requests] == ["served-b"]  # the unknown one is never asked
    assert "lists no model 'served-c' (it lists served-a, served-b)" in message and "--model openai/served-a" in message


def test_preflight_unlisted_model_is_tried_once(no_keys, monkeypatch):
    """A model litellm does not list (no --api-base): one request, no retry; a refusal stops the run."""
    with FakeOpenAIServer([Status(404, message="The model `gpt-4o-mni` does not exist")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # where litellm sends openai/ models
        message = setup_error(LLMSettings(model="openai/gpt-4o-mni", api_key=KEY))
        assert len(server.requests) == 1 and server.requests[0]["json"]["model"] == "gpt-4o-mni"
    assert "a one-token test request failed (NotFoundError: " in message and "does not exist" in message
    assert "did you mean openai/gpt-4o-mini?" in message
    with FakeOpenAIServer(["OK"]) as server:  # an answer: the search goes on
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        check_llm(LLMSettings(model="openai/brand-new-model", api_key=KEY))
        assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("action", "says"),
    [
        (Status(404), "NotFoundError: "),
        (Status(401), "the key was refused: pass --api-key KEY"),
        (Status(429, retry_after=0), "the provider refuses calls now (rate limit or quota)"),
        (Status(503, retry_after=0), "check --model and --api-base"),
    ],
)
def test_preflight_any_failure_of_the_test_request_stops_the_run(no_keys, action, says):
    """A server that answers 404 (or anything but a completion) to every request fails the preflight, after one request."""
    with FakeOpenAIServer([action]) as server:  # GET /models: 404, as from a server that answers 404 to everything
        message = setup_error(settings_for(server))
        assert len(server.requests) == 1 and len(server.gets) == 1
    assert message.startswith(f"--model openai/fake-model: a one-token test request to {server.base_url} failed (")
    assert says in message


def test_cost_cap_needs_a_price(no_keys):
    unpriced = LLMSettings(model="openai/fake-model", api_key=KEY)
    with pytest.raises(SetupError, match=r"--max-cost 2: litellm has no price for openai/fake-model.*--price-in USD --price-out USD"):
        check_cost_cap(unpriced, "--max-cost", 2.0)
    check_cost_cap(unpriced, "--max-cost", None)  # no cap: nothing to check
    check_cost_cap(LLMSettings(model="openai/fake-model", price_in=1.0, price_out=2.0), "--max-cost", 2.0)
    check_cost_cap(LLMSettings(model="gemini/gemini-2.5-pro"), "--max-cost", 2.0)  # litellm's price
    check_cost_cap(LLMSettings(model="scripted/reference"), "--max-cost", 2.0)  # free: $0 is the truth
    assert preflight.has_litellm_price("anthropic/claude-sonnet-4-5") and not preflight.has_litellm_price("openai/fake-model")
