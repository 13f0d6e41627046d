/* The table-slot hash of both sources of cranfield.inputs._mapscan (_mapscan.c, _jsonscan.c):
   splitmix64's finalizer over a hash mixed with the per-process random seed, so that no input
   can be made to cluster in a table (the docid hashes and FNV-1a are public and unseeded). */
#ifndef CRANFIELD_SEEDED_MIX_H
#define CRANFIELD_SEEDED_MIX_H

#include <stdint.h>

static inline uint64_t seeded_mix(uint64_t h, uint64_t seed) {
    h ^= seed;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

#endif
