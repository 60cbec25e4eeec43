//! Seeded randomness for a whole test process.
//!
//! The node code draws random numbers in places no seed reaches: host ids
//! and repair sessions (UUIDs), gossip's generator, HTTP/2's and tokio's
//! internals, and the keys of every `HashMap`, whose iteration order then
//! decides, for instance, which replica a message goes to first. All of
//! them come from the C library's `getrandom`. A simulation test binary
//! replaces that function with one drawing from this module's stream
//! ([`interpose_getrandom!`](crate::interpose_getrandom)), seeded from the
//! run's seed before the simulation's thread starts: the run is then the
//! same every time.
//!
//! # Caveats
//! - The stream is one for the process, so a run reproduces only when it
//!   is the process's only run (one seed per test, as nextest runs them;
//!   see the crate docs). Threads other than the simulation's that draw
//!   meanwhile (none should) would shift it.
//! - The bytes are not secret: never link this into anything but a test.

use std::sync::{Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

static STREAM: Mutex<Option<StdRng>> = Mutex::new(None);

/// Restarts the stream from `seed`.
pub fn seed(seed: u64) {
    *STREAM.lock().unwrap_or_else(PoisonError::into_inner) = Some(StdRng::seed_from_u64(seed));
}

/// Fills `bytes` from the stream (from seed 0 if it was never seeded).
pub fn fill(bytes: &mut [u8]) {
    let mut stream = STREAM.lock().unwrap_or_else(PoisonError::into_inner);
    stream
        .get_or_insert_with(|| StdRng::seed_from_u64(0))
        .fill_bytes(bytes);
}

/// Defines the C library's `getrandom` in the calling test binary as a
/// draw from [`fill`]: every `HashMap`, UUID and random generator of the
/// process then follows the seed. Use it once, at the top level of a
/// simulation's test file, and in nothing else.
#[macro_export]
macro_rules! interpose_getrandom {
    () => {
        /// The C library's `getrandom`, replaced for this test binary by
        /// the simulation's seeded stream (see `ringstore_simulation::entropy`).
        ///
        /// # Safety
        /// `buffer` must be valid for writes of `length` bytes, as the C
        /// function requires.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn getrandom(buffer: *mut u8, length: usize, _flags: u32) -> isize {
            if length == 0 {
                return 0;
            }
            // SAFETY: the caller passes a buffer valid for `length` bytes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(buffer, length) };
            $crate::entropy::fill(bytes);
            isize::try_from(length).unwrap_or(isize::MAX)
        }
    };
}
