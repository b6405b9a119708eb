/* llamacpp_logits: run llama.cpp (libllama) once over a token sequence and print, for every position, the
 * top-K token ids with their log-probabilities as one line of JSON. Used by scripts/record_llamacpp_logits.sh
 * to record reference data for the random-weight model tests; not part of onewell.
 *
 * usage: llamacpp_logits MODEL.gguf TOP_K THREADS TEXT
 *   TEXT is tokenized by llama.cpp itself (its special-token rule: BOS when the vocabulary asks for it), so the
 *   recorded ids are llama.cpp's tokenization of TEXT with the model's real vocabulary.
 * output: {"ids": [...], "n_vocab": N, "top_ids": [[...] per position], "top_logprobs": [[...] per position]}
 * Log-probabilities are computed here in double precision from llama.cpp's float logits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void die(const char *what) {
    fprintf(stderr, "llamacpp_logits: %s\n", what);
    exit(1);
}

static const float *g_row;  /* the row qsort ranks */

static int by_logit_desc(const void *a, const void *b) {
    float x = g_row[*(const int *)a], y = g_row[*(const int *)b];
    if (x != y) return x < y ? 1 : -1;
    return *(const int *)a - *(const int *)b;  /* ties: lower id first, so the output is deterministic */
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 5) die("usage: llamacpp_logits MODEL.gguf TOP_K THREADS TEXT");
    const char *path = argv[1], *text = argv[4];
    int top_k = atoi(argv[2]), threads = atoi(argv[3]);
    if (top_k <= 0 || threads <= 0) die("TOP_K and THREADS must be positive integers");

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) die("cannot load the model");
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    int n_max = (int)strlen(text) + 8;
    llama_token *ids = malloc(sizeof(llama_token) * (size_t)n_max);
    if (!ids) die("out of memory");
    int n = llama_tokenize(vocab, text, (int32_t)strlen(text), ids, n_max, /*add_special*/ true,
                           /*parse_special*/ false);
    if (n <= 0) die("tokenization failed or gave no tokens");

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)(n < 64 ? 64 : n);
    cp.n_threads = cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context");

    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;  /* every position's logits */
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) die("llama_decode failed");

    int *order = malloc(sizeof(int) * (size_t)n_vocab);
    if (!order) die("out of memory");
    if (top_k > n_vocab) top_k = n_vocab;
    printf("{\"ids\": [");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"n_vocab\": %d, \"top_ids\": [", n_vocab);
    /* two passes over the positions keep the output one JSON object without storing the rankings */
    for (int pass = 0; pass < 2; pass++) {
        if (pass) printf("], \"top_logprobs\": [");
        for (int i = 0; i < n; i++) {
            const float *row = llama_get_logits_ith(ctx, i);
            if (!row) die("no logits for a position");
            double max = row[0], sum = 0.0;
            for (int v = 1; v < n_vocab; v++) if (row[v] > max) max = row[v];
            for (int v = 0; v < n_vocab; v++) sum += exp((double)row[v] - max);
            double log_z = max + log(sum);
            for (int v = 0; v < n_vocab; v++) order[v] = v;
            g_row = row;
            qsort(order, (size_t)n_vocab, sizeof(int), by_logit_desc);
            printf("%s[", i ? ", " : "");
            for (int j = 0; j < top_k; j++) {
                if (pass == 0) printf("%s%d", j ? ", " : "", order[j]);
                else printf("%s%.6f", j ? ", " : "", (double)row[order[j]] - log_z);
            }
            printf("]");
        }
    }
    printf("]}\n");

    free(order);
    free(ids);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
