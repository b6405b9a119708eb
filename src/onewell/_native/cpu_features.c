#include "cpu_features.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void probe(ow_cpu_features *f) {
    unsigned int a, b, c, d;
    memset(f, 0, sizeof *f);
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    unsigned long long xcr0 = xgetbv0();
    int ymm_ok = (xcr0 & 0x6) == 0x6;      /* OS saves SSE and AVX state */
    int zmm_ok = (xcr0 & 0xe6) == 0xe6;    /* ... and the AVX-512 opmask/ZMM state */
    if (!ymm_ok) { f->fma = f->f16c = 0; return; }
    if (__get_cpuid_max(0, 0) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    if (zmm_ok) {
        f->avx512f = (b >> 16) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512_vnni = (c >> 11) & 1;
    }
    __cpuid_count(7, 1, a, b, c, d);
    f->avx_vnni = (a >> 4) & 1;
}
#else
static void probe(ow_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

static ow_cpu_features g_features;
static int g_probed;

const ow_cpu_features *ow_cpu(void) {
    if (!g_probed) { probe(&g_features); g_probed = 1; }
    return &g_features;
}

const char *ow_isa_name(ow_isa isa) {
    switch (isa) {
    case OW_ISA_AVX512: return "avx512";
    case OW_ISA_AVX2: return "avx2";
    default: return "generic";
    }
}

ow_isa ow_isa_best(void) {
    const ow_cpu_features *f = ow_cpu();
    ow_isa best = OW_ISA_GENERIC;
    if (f->avx2 && f->fma && f->f16c) best = OW_ISA_AVX2;
    if (best == OW_ISA_AVX2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512_vnni) best = OW_ISA_AVX512;
    const char *cap = getenv("ONEWELL_ISA");
    if (cap) {
        ow_isa limit = OW_ISA_AVX512;
        if (!strcmp(cap, "generic")) limit = OW_ISA_GENERIC;
        else if (!strcmp(cap, "avx2")) limit = OW_ISA_AVX2;
        if (limit < best) best = limit;
    }
    return best;
}
