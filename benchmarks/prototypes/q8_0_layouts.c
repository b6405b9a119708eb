#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
typedef struct { uint16_t d; int8_t qs[32]; } __attribute__((packed)) blk;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}

/* V1: ggml layout, per block 256-bit, 4 rows */
T static void v1(int nb, const blk *w, size_t stride_blocks, const blk *x, float *s, int nrows) {
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        __m256 acc0=_mm256_setzero_ps(),acc1=acc0,acc2=acc0,acc3=acc0;
        const blk *w0=w+(size_t)r0*stride_blocks,*w1=w0+stride_blocks,*w2=w1+stride_blocks,*w3=w2+stride_blocks;
        for (int b = 0; b < nb; b++) {
            const __m256i a = _mm256_loadu_si256((const __m256i*)x[b].qs);
            const __m256i seed = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), k80, a));
            const float dx = _cvtsh_ss(x[b].d);
#define ROW(acc, wr) { __m256i p = _mm256_dpbusd_epi32(seed, _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)wr[b].qs), k80), a); \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(wr[b].d)*dx), acc); }
            ROW(acc0,w0) ROW(acc1,w1) ROW(acc2,w2) ROW(acc3,w3)
        }
        __m256 t[4]={acc0,acc1,acc2,acc3};
        for(int i=0;i<4;i++){ __m128 q=_mm_add_ps(_mm256_castps256_ps128(t[i]),_mm256_extractf128_ps(t[i],1)); q=_mm_hadd_ps(q,q); q=_mm_hadd_ps(q,q); s[r0+i]=_mm_cvtss_f32(q);}
    }
}
/* V2: repacked: row = [qs (n bytes, xored 0x80)] then scales f16 [nb]; row stride aligned 64 */
T static void v2(int nb, const uint8_t *w, size_t stride, const int8_t *xqs, const float *xd, float *s, int nrows) {
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    const __m512i idx_lo = _mm512_set_epi32(1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0);
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        __m512 acc[4]={_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps()};
        const uint8_t *wr = w + (size_t)r0*stride;
        for (int b = 0; b < nb; b += 16) {   /* 16 blocks = 512 elements */
            const __m512 dx = _mm512_loadu_ps(xd + b);
            __m512 dw[4];
            for (int r=0;r<4;r++) dw[r] = _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(wr + r*stride + (size_t)nb*32 + 2*b))));
            for (int p = 0; p < 8; p++) {
                const __m512i a = _mm512_loadu_si512(xqs + 32*b + 64*p);
                const __m512i seed = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, a));
                const __m512i idx = _mm512_add_epi32(idx_lo, _mm512_set1_epi32(2*p));
                for (int r=0;r<4;r++){
                    __m512i q = _mm512_load_si512(wr + r*stride + 32*b + 64*p);
                    __m512i pr = _mm512_dpbusd_epi32(seed, q, a);
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pr), _mm512_permutexvar_ps(idx, dw[r]), acc[r]);
                }
            }
        }
        for(int r=0;r<4;r++) s[r0+r]=_mm512_reduce_add_ps(acc[r]);
    }
}

#define LDW(p) (m==16 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(mk, p))
/* V3: lane-interleaved groups of 16 blocks: chunk j of a group holds bytes 4j..4j+3 of each block, so
   dpbusd lane k accumulates block k. Row = [groups' qs (n bytes, xored 0x80)][f16 scales nb], stride 64-aligned. */
T static void v3(int nb, const uint8_t *w, size_t stride, const uint8_t *xi, const float *xd, const int32_t *xseed, float *s, int nrows) {
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        __m512 acc[4]={_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps()};
        const uint8_t *wr = w + (size_t)r0*stride;
        for (int g = 0; g < nb; g += 16) {
            const int m = nb - g < 16 ? nb - g : 16;
            const __mmask16 mk = (__mmask16)((1u << m) - 1);
            const __m512i seed = _mm512_maskz_loadu_epi32(mk, xseed + g);
            __m512i p0 = seed, p1 = seed, p2 = seed, p3 = seed;
            const uint8_t *xg = xi + 32*g;
            for (int j = 0; j < 8; j++) {
                const __m512i a = _mm512_maskz_loadu_epi32(mk, xg + 4*m*j);
                p0 = _mm512_dpbusd_epi32(p0, LDW(wr + 32*g + 4*m*j), a);
                p1 = _mm512_dpbusd_epi32(p1, LDW(wr + stride + 32*g + 4*m*j), a);
                p2 = _mm512_dpbusd_epi32(p2, LDW(wr + 2*stride + 32*g + 4*m*j), a);
                p3 = _mm512_dpbusd_epi32(p3, LDW(wr + 3*stride + 32*g + 4*m*j), a);
            }
            const __m512 dx = _mm512_maskz_loadu_ps(mk, xd + g);
            const size_t so = (size_t)nb*32 + 2*g;
#define SC(r) _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, wr + r*stride + so)))
            acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), SC(0), acc[0]);
            acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), SC(1), acc[1]);
            acc[2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p2), SC(2), acc[2]);
            acc[3] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p3), SC(3), acc[3]);
        }
        for(int r=0;r<4;r++) s[r0+r]=_mm512_reduce_add_ps(acc[r]);
    }
}

/* V4: like v3 but the 4 rows of a tile are interleaved group by group so a tile is one sequential stream:
   tile = for each group g: [4 x qs (32m bytes each)][4 x f16 scales (2m bytes each)] */
T static void v4(int nb, const uint8_t *w, size_t tile_bytes, const uint8_t *xi, const float *xd, const int32_t *xseed, float *s, int nrows) {
    for (int r0 = 0; r0 < nrows; r0 += 4) {
        __m512 acc[4]={_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps(),_mm512_setzero_ps()};
        const uint8_t *t = w + (size_t)(r0/4)*tile_bytes;
        for (int g = 0; g < nb; g += 16) {
            const int m = nb - g < 16 ? nb - g : 16;
            const __mmask16 mk = (__mmask16)((1u << m) - 1);
            const __m512i seed = _mm512_maskz_loadu_epi32(mk, xseed + g);
            __m512i p0 = seed, p1 = seed, p2 = seed, p3 = seed;
            const uint8_t *xg = xi + 32*g;
            const size_t q = 32*m;
            for (int j = 0; j < 8; j++) {
                const __m512i a = _mm512_maskz_loadu_epi32(mk, xg + 4*m*j);
#ifdef PF
                _mm_prefetch((const char*)t + 4*m*j + PF, _MM_HINT_T0); _mm_prefetch((const char*)t + q + 4*m*j + PF, _MM_HINT_T0);
                _mm_prefetch((const char*)t + 2*q + 4*m*j + PF, _MM_HINT_T0); _mm_prefetch((const char*)t + 3*q + 4*m*j + PF, _MM_HINT_T0);
#endif
                p0 = _mm512_dpbusd_epi32(p0, LDW(t + 4*m*j), a);
                p1 = _mm512_dpbusd_epi32(p1, LDW(t + q + 4*m*j), a);
                p2 = _mm512_dpbusd_epi32(p2, LDW(t + 2*q + 4*m*j), a);
                p3 = _mm512_dpbusd_epi32(p3, LDW(t + 3*q + 4*m*j), a);
            }
            const __m512 dx = _mm512_maskz_loadu_ps(mk, xd + g);
            const uint8_t *sc = t + 4*q;
#define SC4(r) _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, sc + r*2*m)))
            acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), SC4(0), acc[0]);
            acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), SC4(1), acc[1]);
            acc[2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p2), SC4(2), acc[2]);
            acc[3] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p3), SC4(3), acc[3]);
            t += 4*q + 8*m;
        }
        for(int r=0;r<4;r++) s[r0+r]=_mm512_reduce_add_ps(acc[r]);
    }
}
T static long v0(const uint8_t *w, size_t n){ __m512i a=_mm512_setzero_si512(),b=a,c=a,d=a; for(size_t i=0;i<n;i+=256){a=_mm512_add_epi32(a,_mm512_load_si512(w+i));b=_mm512_add_epi32(b,_mm512_load_si512(w+i+64));c=_mm512_add_epi32(c,_mm512_load_si512(w+i+128));d=_mm512_add_epi32(d,_mm512_load_si512(w+i+192));} return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a,b),_mm512_add_epi32(c,d)));}
T int main(){
    int ncols=NCOLS, nrows=NROWS, nb=ncols/32;
    size_t nbytes=(size_t)nrows*nb*34;
    blk *w=aligned_alloc(64,(nbytes+63)/64*64); for(size_t i=0;i<nbytes;i++) ((uint8_t*)w)[i]=rand();
    for(size_t i=0;i<(size_t)nrows*nb;i++) w[i].d=0x3c00;
    blk *x=malloc(nb*sizeof(blk)); for(int i=0;i<nb;i++){x[i].d=0x3c00; for(int j=0;j<32;j++) x[i].qs[j]=rand();}
    float *s=malloc(nrows*4), *s2=malloc(nrows*4);
    size_t stride=((size_t)nb*34+63)/64*64; uint8_t *w2=aligned_alloc(64,stride*nrows);
    for(int r=0;r<nrows;r++){ for(int b=0;b<nb;b++){ for(int j=0;j<32;j++) w2[r*stride+b*32+j]=(uint8_t)(w[(size_t)r*nb+b].qs[j]^0x80); ((uint16_t*)(w2+r*stride+nb*32))[b]=w[(size_t)r*nb+b].d; } }
    int8_t xqs[NCOLS]; float xd[NCOLS/32]; for(int b=0;b<nb;b++){memcpy(xqs+32*b,x[b].qs,32); xd[b]=_cvtsh_ss(x[b].d);}
    size_t stride3=stride; uint8_t *w3=aligned_alloc(64,stride3*nrows); uint8_t xi[NCOLS]; int32_t xseed[NCOLS/32];
    for(int r=0;r<nrows;r++) for(int g=0;g<nb;g+=16){ int m=nb-g<16?nb-g:16; for(int j=0;j<8;j++) for(int k=0;k<m;k++) for(int t=0;t<4;t++){
        w3[r*stride3+32*g+4*m*j+4*k+t]=(uint8_t)(w[(size_t)r*nb+g+k].qs[4*j+t]^0x80); if(r==0) xi[32*g+4*m*j+4*k+t]=(uint8_t)x[g+k].qs[4*j+t]; } }
    for(int r=0;r<nrows;r++) for(int b=0;b<nb;b++) ((uint16_t*)(w3+r*stride3+nb*32))[b]=w[(size_t)r*nb+b].d;
    for(int b=0;b<nb;b++){int sm=0; for(int j=0;j<32;j++) sm+=x[b].qs[j]; xseed[b]=-128*sm;}
    float *s3=malloc(nrows*4), *s4=malloc(nrows*4);
    size_t tile_bytes=(size_t)4*nb*34; uint8_t *w4=aligned_alloc(64,(tile_bytes*(nrows/4)+63)/64*64);
    for(int r=0;r<nrows;r++){ size_t off=(size_t)(r/4)*tile_bytes; int rr=r%4; for(int g=0;g<nb;g+=16){ int m=nb-g<16?nb-g:16;
        for(int i=0;i<32*m;i++) w4[off+rr*32*m+i]=w3[r*stride3+32*g+i];
        memcpy(w4+off+4*32*m+rr*2*m, w3+r*stride3+nb*32+2*g, 2*m); off+=4*34*m; } }
    for(int rep=0;rep<5;rep++){
        double t7=now(); for(int i=0;i<5*ITER;i++) v4(nb,w4,tile_bytes,xi,xd,xseed,s4,nrows); double t8=now();
        printf("v4 %.1f GB/s (check %f) ", 5.0*ITER*tile_bytes*(nrows/4)/(t8-t7)/1e9, s4[123]);
        double t5=now(); for(int i=0;i<5*ITER;i++) v3(nb,w3,stride3,xi,xd,xseed,s3,nrows); double t6=now();
        printf("v3 %.1f GB/s (check %f) ", 5.0*ITER*stride3*nrows/(t6-t5)/1e9, s3[123]);
        double t0=now(); for(int i=0;i<5;i++) v1(nb,w,nb,x,s,nrows); double t1=now();
        for(int i=0;i<5;i++) v2(nb,w2,stride,xqs,xd,s2,nrows); double t2=now();
        double t3=now(); long z=0; for(int i=0;i<5*ITER;i++) z+=v0(w2,stride*nrows/256*256); double t4=now();
        printf("v0 %.1f GB/s (%ld) ", 5.0*ITER*(stride*nrows/256*256)/(t4-t3)/1e9, z);
        printf("v1 %.1f GB/s  v2 %.1f GB/s  (check %f %f)\n", 5*nbytes/(t1-t0)/1e9, 5.0*stride*nrows/(t2-t1)/1e9, s[123], s2[123]);
    }
}
