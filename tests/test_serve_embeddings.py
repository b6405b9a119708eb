"""/v1/embeddings through the official `openai` client (and raw httpx where the client would hide the wire
format), on nomic-embed-text-v1.5 (native); and the 400s for the wrong kind of model on each endpoint."""
from __future__ import annotations

import base64

import httpx
import numpy as np
import openai
import pytest
from conftest import f16_batch_atol, read_jsonl, scaled

import onewell
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer

pytestmark = pytest.mark.model

ROWS = read_jsonl("embed_nomic-embed-text-v1.5-f16.jsonl")[:3]


@pytest.fixture(scope="module")
def model(nomic_embed_path):
    return onewell.load(nomic_embed_path, backend="native", threads=2)


@pytest.fixture(scope="module")
def server(model):
    with BackgroundServer(create_app(model, queue=4, model_name="nomic")) as s:
        yield s


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=scaled(120))


def gold(i: int) -> np.ndarray:
    v = np.array(ROWS[i]["embedding"])
    return v / np.linalg.norm(v)


def test_string_and_list_of_strings_match_llamacpp(client, model):
    one = client.embeddings.create(model="nomic", input=ROWS[0]["text"])
    assert len(one.data) == 1 and one.data[0].index == 0 and one.model == "nomic"
    assert one.usage.prompt_tokens == len(ROWS[0]["ids"]) == one.usage.total_tokens
    assert np.dot(one.data[0].embedding, gold(0)) >= 0.999
    many = client.embeddings.create(model="nomic", input=[r["text"] for r in ROWS], encoding_format="float")
    assert [d.index for d in many.data] == [0, 1, 2]
    for i, d in enumerate(many.data):
        assert len(d.embedding) == 768
        assert np.dot(d.embedding, gold(i)) >= 0.999
    # the three texts share a step: exact where F16 batches are, float GEMM rounding on the AVX2 paths
    n_tokens = sum(len(r["ids"]) for r in ROWS)
    np.testing.assert_allclose(many.data[0].embedding, one.data[0].embedding, atol=f16_batch_atol(n_tokens))


def test_token_ids_and_lists_of_token_ids(client):
    single = client.embeddings.create(model="nomic", input=ROWS[1]["ids"])
    assert np.dot(single.data[0].embedding, gold(1)) >= 0.999
    lists = client.embeddings.create(model="nomic", input=[r["ids"] for r in ROWS])
    assert len(lists.data) == 3 and lists.usage.prompt_tokens == sum(len(r["ids"]) for r in ROWS)
    assert all(np.dot(d.embedding, gold(i)) >= 0.999 for i, d in enumerate(lists.data))


def test_dimensions_truncate_then_renormalize(client):
    full = np.array(client.embeddings.create(model="nomic", input=ROWS[2]["text"]).data[0].embedding)
    cut = np.array(client.embeddings.create(model="nomic", input=ROWS[2]["text"], dimensions=64).data[0].embedding)
    assert cut.shape == (64,)
    assert abs(np.linalg.norm(cut) - 1) < 1e-5
    np.testing.assert_allclose(cut, full[:64] / np.linalg.norm(full[:64]), atol=1e-6)


def test_base64_is_little_endian_float32(server, client):
    floats = client.embeddings.create(model="nomic", input="hello", encoding_format="float").data[0].embedding
    raw = httpx.post(server.url + "/v1/embeddings", json={"input": "hello", "encoding_format": "base64"},
                     timeout=scaled(60)).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.array(floats, dtype=np.float32))
    # the openai client asks for base64 by default and decodes it itself: the same vector
    assert np.allclose(client.embeddings.create(model="nomic", input="hello").data[0].embedding, floats)


@pytest.mark.parametrize("body, needle", [
    ({"input": []}, "1 to 2048 items"),
    ({"input": [[]]}, "empty"),
    ({"input": [101, 99999999, 102]}, "outside the vocabulary"),
    ({"input": "x", "dimensions": 769}, "dimensions must be"),
    ({"input": "x", "dimensions": 0}, "dimensions"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": [101] * 2049}, "more than the 2048"),
    ({}, "input"),
])
def test_bad_requests_are_400(server, body, needle):
    r = httpx.post(server.url + "/v1/embeddings", json=body, timeout=scaled(60))
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_chat_and_completions_on_an_embedding_model_are_400(client):
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.chat.completions.create(model="nomic", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.completions.create(model="nomic", prompt="hi")


def test_metrics_count_embedding_requests(server, client):
    before = httpx.get(server.url + "/metrics", timeout=scaled(10)).json()
    client.embeddings.create(model="nomic", input=["a", "b"])
    after = httpx.get(server.url + "/metrics", timeout=scaled(10)).json()
    assert after["embedding_requests"] == before["embedding_requests"] + 1
    assert after["embedding_inputs"] == before["embedding_inputs"] + 2


def test_embeddings_on_a_generative_model_are_400(smollm_path):
    gen = onewell.load(smollm_path, backend="native", threads=1, n_ctx=256)
    with BackgroundServer(create_app(gen, model_name="smol")) as s:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=scaled(60))
        with pytest.raises(openai.BadRequestError, match="generative model"):
            c.embeddings.create(model="smol", input="hello")
    with pytest.raises(onewell.errors.WrongModelKindError, match="generative model"):
        gen.embed(["hello"])


def test_python_api_embed_and_refusals(model):
    vectors = model.embed([r["text"] for r in ROWS])
    assert vectors.shape == (3, 768) and vectors.dtype == np.float32
    assert model.embed(ROWS[0]["text"]).shape == (1, 768)
    assert model.embed(ROWS[0]["text"], dimensions=256).shape == (1, 256)
    with pytest.raises(onewell.errors.WrongModelKindError, match="embedding model"):
        model.generate("hi")
