/* aarch64 NEON dot kernels in two flavours from one source (vec_dot_neon.inc): plain AdvSIMD, where s8 x s8
 * products go through smull + sadalp, and NEON + dotprod (Armv8.2 FEAT_DotProd), where sdot does 4 products
 * and the add per lane in one step. The extension is built without -march flags: the dotprod functions carry
 * a target attribute and matvec.c only calls them after the CPU reported the feature (cpu_features.c). */
#include "vec_dot.h"

#if OW_NEON_KERNELS
#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#define OW_NSUFFIX neon
#define OW_NTARGET
#define OW_NDOTPROD 0
#include "vec_dot_neon.inc"
#undef OW_NSUFFIX
#undef OW_NTARGET
#undef OW_NDOTPROD

#define OW_NSUFFIX neon_dotprod
#if defined(__clang__)
#define OW_NTARGET __attribute__((target("dotprod")))
#if !defined(__ARM_FEATURE_DOTPROD)
#define OW_SDOT_ASM 1 /* the .inc writes sdot as inline asm: clang's vdotq_s32 needs dotprod for the whole file */
#endif
#else
/* arm_neon.h defines vdotq_s32 under this exact target; "+dotprod" on the armv8-a base would not inline it */
#define OW_NTARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#ifndef OW_SDOT_ASM
#define OW_SDOT_ASM 0
#endif
#define OW_NDOTPROD 1
#include "vec_dot_neon.inc"
#undef OW_NSUFFIX
#undef OW_NTARGET
#undef OW_NDOTPROD

#endif
