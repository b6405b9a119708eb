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
    f->amx_tile = (d >> 24) & 1;   /* reported only (never executed): marks Sapphire Rapids and later Xeons */
    __cpuid_count(7, 1, a, b, c, d);
    f->avx_vnni = (a >> 4) & 1;
    f->avx512_bf16 = zmm_ok && f->avx512f && ((a >> 5) & 1);
}

/* L1 data cache size in KiB: AMD reports it in leaf 0x80000005 (ECX bits 31..24); Intel describes each cache level
 * in leaf 4's subleaves (size = ways x partitions x line size x sets). 0 if not reported. */
static int probe_l1d_kib(int amd) {
    unsigned int a, b, c, d;
    if (amd) return __get_cpuid(0x80000005u, &a, &b, &c, &d) ? (int)(c >> 24) : 0;
    if (__get_cpuid_max(0, 0) < 4) return 0;
    for (unsigned int i = 0; i < 16; i++) {
        __cpuid_count(4, i, a, b, c, d);
        const unsigned int type = a & 0x1f, level = (a >> 5) & 0x7;
        if (type == 0) break;
        if (type == 1 && level == 1) {   /* data cache, level 1 */
            const unsigned long long bytes = (unsigned long long)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) *
                                             ((b & 0xfff) + 1) * ((unsigned long long)c + 1);
            return (int)(bytes >> 10);
        }
    }
    return 0;
}

/* vendor and display family / model: family 15 adds the extended family, families 6 and 15 the extended model */
static void probe_identity(ow_cpu_features *f) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    f->amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;     /* "AuthenticAMD" */
    f->intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;   /* "GenuineIntel" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int base_family = (int)((a >> 8) & 0xf), base_model = (int)((a >> 4) & 0xf);
    const int ext_family = (int)((a >> 20) & 0xff), ext_model = (int)((a >> 16) & 0xf);
    f->family = base_family == 15 ? base_family + ext_family : base_family;
    f->model = base_family == 6 || base_family == 15 ? base_model | (ext_model << 4) : base_model;
    f->l1d_kib = probe_l1d_kib(f->amd);
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
/* bits of AT_HWCAP / AT_HWCAP2 (linux/arch/arm64/include/uapi/asm/hwcap.h), spelled out for old headers */
#define OW_HWCAP_ASIMD (1UL << 1)
#define OW_HWCAP_ASIMDDP (1UL << 20)
#define OW_HWCAP2_I8MM (1UL << 13)

static void probe(ow_cpu_features *f) {
    memset(f, 0, sizeof *f);
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->neon = (hw & OW_HWCAP_ASIMD) != 0;
    f->dotprod = f->neon && (hw & OW_HWCAP_ASIMDDP) != 0;
    f->i8mm = f->neon && (hw2 & OW_HWCAP2_I8MM) != 0;
}
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
/* untested here (no macOS machine): the hw.optional.arm.FEAT_* names of macOS 12+; AdvSIMD is always there */
static int sysctl_flag(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}

static void probe(ow_cpu_features *f) {
    memset(f, 0, sizeof *f);
    f->neon = 1;
    f->dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    f->i8mm = sysctl_flag("hw.optional.arm.FEAT_I8MM");
}
#elif defined(__aarch64__)
/* another OS: AdvSIMD is architectural on aarch64; the optional extensions are not probed */
static void probe(ow_cpu_features *f) { memset(f, 0, sizeof *f); f->neon = 1; }
#else
static void probe(ow_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

static ow_cpu_features g_features;
static int g_probed;

const ow_cpu_features *ow_cpu(void) {
    if (!g_probed) {
        probe(&g_features);
#if defined(__x86_64__) || defined(__i386__)
        probe_identity(&g_features);
#endif
        g_probed = 1;
    }
    return &g_features;
}

/* Zen 3: the AMD family 0x19 CPUs without AVX-512 (Zen 4 has it), measured on a Milan EPYC (model 1, perf-log 46) */
static int amd_zen3(const ow_cpu_features *f) { return f->amd && f->family == 0x19 && !f->avx512f; }

size_t ow_default_prefetch(const ow_cpu_features *f) {
    /* AMD Zen 4 EPYC (Genoa, family 0x19 models 0x10-0x1f): the hardware prefetchers keep up and software prefetch
     * only costs, 1.03-1.24x faster decode without it on every path and model measured (perf-log entry 19).
     * The AVX-512 machine of entry 3 gains from it, as other CPUs may. */
    if (f->amd && f->family == 0x19 && f->model >= 0x10 && f->model <= 0x1f) return 0;
    /* Zen 3: entry 17 lost 19 % without it when the decode kernels read one row at a time; since they read rows in
     * pairs (entry 22) and in the R8 layouts (entry 46) the hardware prefetchers keep up there too: 1.07-1.12x
     * faster R8 decode without, file layouts 1.01-1.10x, F16 1.05-1.09x (entry 46) */
    if (amd_zen3(f)) return 0;
    /* AMD family 0x17 (Zen, Zen+, Zen 2): measured on one, a KVM guest reporting model 1 (Zen 1's EPYC; its decode
     * speeds fit 256-bit work split in two): 1.14-1.17x faster Q8_0 decode without, F16 1.05-1.08x (entry 41) */
    if (f->amd && f->family == 0x17) return 0;
    return 8192;
}

/* The R8 layouts on the AVX2 path (native_kernels.R8_LAYOUTS): AMD family 0x17 (perf-log 42-45) and Zen 3 (perf-log
 * 46: decode 1.14-1.34x, prefill 0.96-1.00x) */
int ow_default_r8(const ow_cpu_features *f) { return (f->amd && f->family == 0x17) || amd_zen3(f); }

size_t ow_default_f16_prefetch(const ow_cpu_features *f) {
    return f->intel && f->amx_tile ? 16384 : ow_default_prefetch(f);
}

int ow_default_wide_tiles(const ow_cpu_features *f) {
    /* Xeons with AMX (Sapphire Rapids on) run 512-bit integer and FMA work on two ports (measured, perf-log entry
     * 24); earlier AVX-512 Intel CPUs include models with a single 512-bit FMA unit, where a zmm tile would run at
     * half the rate of the ymm one, and Zen 4 splits 512-bit work in two: those keep the 256-bit tile. */
    return f->intel && f->avx512f && f->amx_tile;
}

int ow_default_float_gemm(const ow_cpu_features *f) {
    (void)f;   /* one measured CPU so far (entry 25); benchmarks/cpu_decisions.py measures the next */
    return 1;
}

int ow_default_gemm_overlap(const ow_cpu_features *f) { return f->l1d_kib >= 48; }

int ow_default_rows_gemm(const ow_cpu_features *f, int path) {
    /* AMD family 0x17 (entry 41): vpmaddubsw and vpmaddwd share one integer-multiply pipe while FMAs have two, so
     * Q8_0 prefill is 1.13-1.17x faster as the float GEMM; the other types' rows GEMMs still beat their tiles
     * (Qwen Q4_K_M 1.56x) */
    if (f->amd && f->family == 0x17 && path == OW_ROWS_GEMM_AVX2) return 3;
    return 1;
}

static const char *const isa_names[] = {"generic", "avx2", "avx512", "neon", "dotprod", "avxvnni"};

const char *ow_isa_name(ow_isa isa) {
    return isa >= 0 && isa < (int)(sizeof isa_names / sizeof *isa_names) ? isa_names[isa] : "generic";
}

int ow_isa_from_name(const char *name) {
    for (int i = 0; i < (int)(sizeof isa_names / sizeof *isa_names); i++)
        if (!strcmp(name, isa_names[i])) return i;
    return -1;
}

/* the family (0: none, 1: x86, 2: aarch64) and the rank inside it (0 generic, 1, 2, 3) */
static int isa_family(ow_isa isa) {
    switch (isa) {
    case OW_ISA_AVX2: case OW_ISA_AVXVNNI: case OW_ISA_AVX512: return 1;
    case OW_ISA_NEON: case OW_ISA_DOTPROD: return 2;
    default: return 0;
    }
}
static int isa_rank(ow_isa isa) {
    switch (isa) {
    case OW_ISA_AVX2: case OW_ISA_NEON: return 1;
    case OW_ISA_AVXVNNI: case OW_ISA_DOTPROD: return 2;
    case OW_ISA_AVX512: return 3;
    default: return 0;
    }
}

static int isa_supported(ow_isa isa) {
    const ow_cpu_features *f = ow_cpu();
    const int avx2 = f->avx2 && f->fma && f->f16c;
    switch (isa) {
    case OW_ISA_GENERIC: return 1;
    case OW_ISA_AVX2: return avx2;
    case OW_ISA_AVXVNNI: return avx2 && f->avx_vnni;
    case OW_ISA_AVX512: return avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512_vnni;
    case OW_ISA_NEON: return f->neon;
    case OW_ISA_DOTPROD: return f->neon && f->dotprod;
    default: return 0;
    }
}

/* the supported level of isa's family with the highest rank <= max_rank (generic if none) */
static ow_isa best_supported(int family, int max_rank) {
    static const ow_isa ladder[] = {OW_ISA_AVX512, OW_ISA_AVXVNNI, OW_ISA_AVX2, OW_ISA_DOTPROD, OW_ISA_NEON};
    for (size_t i = 0; i < sizeof ladder / sizeof *ladder; i++)
        if (isa_family(ladder[i]) == family && isa_rank(ladder[i]) <= max_rank && isa_supported(ladder[i]))
            return ladder[i];
    return OW_ISA_GENERIC;
}

static ow_isa isa_of_cpu(void) {
    const ow_cpu_features *f = ow_cpu();
    return f->neon ? best_supported(2, 3) : best_supported(1, 3);
}

ow_isa ow_isa_best(void) {
    ow_isa best = isa_of_cpu();
    const char *cap = getenv("ONEWELL_ISA");
    const int limit = cap ? ow_isa_from_name(cap) : -1;
    if (limit == OW_ISA_GENERIC) return OW_ISA_GENERIC;
    if (limit > 0 && isa_family((ow_isa)limit) == isa_family(best) && isa_rank((ow_isa)limit) < isa_rank(best))
        best = best_supported(isa_family(best), isa_rank((ow_isa)limit));
    return best;
}

int ow_isa_allowed(ow_isa isa) {
    const ow_isa best = ow_isa_best();
    if (isa == OW_ISA_GENERIC) return 1;
    return isa_family(isa) == isa_family(best) && isa_rank(isa) <= isa_rank(best) && isa_supported(isa);
}
