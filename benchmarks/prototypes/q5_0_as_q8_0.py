"""A copy of a GGUF file with every Q5_0 matrix (but the token embedding) rewritten losslessly as Q8_0: the fp16
scale d kept, the quants q - 16 (in [-16, 15]) as int8. The Q8_0 kernels then compute the Q5_0 kernels' integers,
so the logits are the same; only the bytes read and the kernel change (docs/perf-log.md, entry 22: tried, not kept).

    python benchmarks/prototypes/q5_0_as_q8_0.py IN.gguf OUT.gguf
"""
import sys

import numpy as np

from onewell.gguf import GGUFReader
from onewell.gguf.constants import GGMLType
from onewell.gguf.writer import GGUFWriter
from onewell.quant.q5_0 import five_bit_quants


def main(src: str, dst: str) -> None:
    reader, writer = GGUFReader(src), GGUFWriter(dst)
    for key, value in reader.metadata.items():
        writer.add_metadata(key, value, *reader.metadata_types[key])
    for t in reader.tensors.values():
        raw = np.asarray(reader.tensor_data(t.name)).view(np.uint8)
        if t.ggml_type == GGMLType.Q5_0 and t.name != "token_embd.weight":
            blocks = raw.reshape(-1, 22)
            quants = (five_bit_quants(blocks[:, 2:6], blocks[:, 6:22]).astype(np.int16) - 16).astype(np.int8)
            writer.add_tensor(t.name, GGMLType.Q8_0, t.dims, np.concatenate([blocks[:, :2], quants.view(np.uint8)], 1))
        else:
            writer.add_tensor(t.name, t.ggml_type, t.dims, raw)
    writer.write()


if __name__ == "__main__":
    main(*sys.argv[1:3])
