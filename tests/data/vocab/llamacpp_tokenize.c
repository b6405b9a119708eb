// Built against llama.cpp 11434 (see record_llamacpp.py); args: vocab.gguf add_special parse_special.
// Reads texts (separated by "\n__ggml_vocab_test__\n") from stdin; prints llama.cpp's ids per text, then the
// detokenized text (remove_special=0, unparse_special=1) as hex.
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void quiet(enum ggml_log_level l, const char *t, void *u) { (void)l; (void)t; (void)u; }
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int add_special = atoi(argv[2]), parse_special = atoi(argv[3]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = 1;
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) return 3;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    static char buf[1 << 22]; size_t n = fread(buf, 1, sizeof buf - 1, stdin); buf[n] = 0;
    const char *sep = "\n__ggml_vocab_test__\n"; char *p = buf;
    static llama_token ids[1 << 20]; static char out[1 << 22];
    while (*p) {
        char *e = strstr(p, sep); size_t len = e ? (size_t)(e - p) : strlen(p);
        int k = llama_tokenize(v, p, (int)len, ids, 1 << 20, add_special, parse_special);
        for (int i = 0; i < k; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
        int d = llama_detokenize(v, ids, k, out, sizeof out, 0, 1);
        for (int i = 0; i < d; i++) printf("%02x", (unsigned char)out[i]);
        printf("\n");
        if (!e) break;
        p = e + strlen(sep);
    }
    return 0;
}
