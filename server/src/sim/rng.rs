//! A small deterministic PRNG (SplitMix64) and a stateless hash for per-instant noise.
//! Our own, so a seed gives the same cluster on every platform and crate version.

/// SplitMix64: tiny, fast, and good enough for a simulation.
pub struct Rng(u64);

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Exponentially distributed with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

/// Uniform in [0, 1) from (seed, second, key), with no state: the same instant always
/// gets the same noise, however the simulation got there.
pub fn hash_unit(seed: u64, second: i64, key: u64) -> f64 {
    let h = mix(seed ^ mix((second as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ mix(key)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}
