//! A frame copied out of pinned read-back staging by several threads (`neural-frame stream`).

/// Bytes below which a copy out of the staging is not worth another thread.
const COPY_CHUNK: usize = 2 << 20;

/// Threads that copy a frame of `len` bytes out of its staging: a 4K frame is 12 to 50 MB, and
/// one thread's copy of it can hold the stream's main thread longer than the model runs.
pub fn copy_threads(len: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (len / COPY_CHUNK).clamp(1, cores.min(8))
}

/// `bytes` into `out` (resized to it), split among `threads` threads.
pub fn copy_out(out: &mut Vec<u8>, bytes: &[u8], threads: usize) {
    if out.len() != bytes.len() {
        out.clear();
        out.resize(bytes.len(), 0);
    }
    if threads <= 1 {
        out.copy_from_slice(bytes);
        return;
    }
    let chunk = bytes.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut parts = out.chunks_mut(chunk).zip(bytes.chunks(chunk));
        let first = parts.next();
        for (dst, src) in parts {
            s.spawn(move || dst.copy_from_slice(src));
        }
        if let Some((dst, src)) = first {
            dst.copy_from_slice(src);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::copy_out;

    #[test]
    fn a_split_copy_is_the_frame() {
        let frame: Vec<u8> = (0..(5 << 20) + 7).map(|i: usize| (i * 31 % 251) as u8).collect();
        for threads in [1, 2, 3, 8] {
            // Poisoned, longer and shorter buffers from the pool.
            for start in [vec![0xA5u8; frame.len()], vec![0x5Au8; frame.len() + 100], vec![7u8; 3]] {
                let mut out = start;
                copy_out(&mut out, &frame, threads);
                assert!(out == frame, "{threads} threads");
            }
        }
    }
}
