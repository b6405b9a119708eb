#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
T static long add4(const uint8_t *w, size_t n){ __m512i a=_mm512_setzero_si512(),b=a,c=a,d=a; for(size_t i=0;i<n;i+=256){a=_mm512_add_epi32(a,_mm512_load_si512(w+i));b=_mm512_add_epi32(b,_mm512_load_si512(w+i+64));c=_mm512_add_epi32(c,_mm512_load_si512(w+i+128));d=_mm512_add_epi32(d,_mm512_load_si512(w+i+192));} return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a,b),_mm512_add_epi32(c,d)));}
T static long dp4(const uint8_t *w, size_t n){ const __m512i k=_mm512_set1_epi8(3); __m512i a=_mm512_setzero_si512(),b=a,c=a,d=a; for(size_t i=0;i<n;i+=256){a=_mm512_dpbusd_epi32(a,_mm512_load_si512(w+i),k);b=_mm512_dpbusd_epi32(b,_mm512_load_si512(w+i+64),k);c=_mm512_dpbusd_epi32(c,_mm512_load_si512(w+i+128),k);d=_mm512_dpbusd_epi32(d,_mm512_load_si512(w+i+192),k);} return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a,b),_mm512_add_epi32(c,d)));}
T static long dp8(const uint8_t *w, size_t n){ const __m512i k=_mm512_set1_epi8(3); __m512i a[8]; for(int j=0;j<8;j++)a[j]=_mm512_setzero_si512(); for(size_t i=0;i<n;i+=512){for(int j=0;j<8;j++)a[j]=_mm512_dpbusd_epi32(a[j],_mm512_load_si512(w+i+64*j),k);} for(int j=1;j<8;j++)a[0]=_mm512_add_epi32(a[0],a[j]); return _mm512_reduce_add_epi32(a[0]);}
T static long dp4pf(const uint8_t *w, size_t n){ const __m512i k=_mm512_set1_epi8(3); __m512i a=_mm512_setzero_si512(),b=a,c=a,d=a; for(size_t i=0;i<n;i+=256){_mm_prefetch((const char*)w+i+2048,_MM_HINT_T0);_mm_prefetch((const char*)w+i+2048+64,_MM_HINT_T0);_mm_prefetch((const char*)w+i+2048+128,_MM_HINT_T0);_mm_prefetch((const char*)w+i+2048+192,_MM_HINT_T0);a=_mm512_dpbusd_epi32(a,_mm512_load_si512(w+i),k);b=_mm512_dpbusd_epi32(b,_mm512_load_si512(w+i+64),k);c=_mm512_dpbusd_epi32(c,_mm512_load_si512(w+i+128),k);d=_mm512_dpbusd_epi32(d,_mm512_load_si512(w+i+192),k);} return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a,b),_mm512_add_epi32(c,d)));}
int main(){ size_t n=(size_t)512<<20; uint8_t *w=aligned_alloc(64,n); for(size_t i=0;i<n;i++) w[i]=i*7;
  for(int r=0;r<4;r++){ long z=0; double t0=now(); z+=add4(w,n); double t1=now(); z+=dp4(w,n); double t2=now(); z+=dp8(w,n); double t3=now(); z+=dp4pf(w,n); double t4=now();
  printf("add4 %.1f dp4 %.1f dp8 %.1f dp4pf %.1f GB/s (%ld)\n", n/(t1-t0)/1e9, n/(t2-t1)/1e9, n/(t3-t2)/1e9, n/(t4-t3)/1e9, z);} }
