//! The debug port's CPU profiler: samples every thread's stack at a fixed rate of the
//! process's CPU time, then names the frames and draws a flame graph (or prints the folded
//! stacks a flame graph is drawn from).
//!
//! Everything a profile allocates (its sample buffer, the parsed debug information used to
//! name frames) is freed when it ends, so the first profile does not raise the server's
//! memory for good. It does not profile memory, and only one profile runs at a time.

mod sampler;

use std::collections::HashMap;

pub use sampler::{Samples, Sampling, StartError};

/// Samples per second of CPU time: not a multiple of common timer rates.
pub const FREQUENCY: u32 = 99;
/// The most samples one profile keeps (about 17 MB at the deepest stacks).
const MAX_SAMPLES: usize = 32_768;

/// Room for a profile of `seconds` with every CPU busy, and a quarter to spare.
pub fn capacity(seconds: u64) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let expected = seconds
        .saturating_mul(u64::from(FREQUENCY))
        .saturating_mul(cpus);
    (expected.saturating_mul(5) / 4).clamp(64, MAX_SAMPLES as u64) as usize
}

/// How a profile is answered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An SVG flame graph.
    FlameGraph,
    /// One `thread;outer;...;inner count` line per distinct stack, most samples first.
    Folded,
}

/// A rendered profile: its bytes and their content type.
pub struct Rendered {
    pub body: Vec<u8>,
    pub content_type: &'static str,
}

/// Names the frames of `samples` and renders them; `None` when nothing was sampled.
pub fn render(samples: &Samples, format: Format) -> Result<Option<Rendered>, String> {
    let folded = fold(samples);
    // The debug information parsed to name frames is large; a profile should not keep it.
    backtrace::clear_symbol_cache();
    if folded.is_empty() {
        return Ok(None);
    }
    let lines: Vec<String> = folded.iter().map(|(s, n)| format!("{s} {n}")).collect();
    Ok(Some(match format {
        Format::Folded => {
            let mut body = lines.join("\n").into_bytes();
            body.push(b'\n');
            Rendered {
                body,
                content_type: "text/plain; charset=utf-8",
            }
        }
        Format::FlameGraph => {
            let mut options = inferno::flamegraph::Options::default();
            options.title = "ratelimit: CPU".to_string();
            let mut svg = Vec::new();
            inferno::flamegraph::from_lines(
                &mut options,
                lines.iter().map(String::as_str),
                &mut svg,
            )
            .map_err(|e| e.to_string())?;
            Rendered {
                body: svg,
                content_type: "image/svg+xml",
            }
        }
    }))
}

/// Distinct stacks, outermost frame first and the thread's name as the root, with their
/// sample counts, most first.
fn fold(samples: &Samples) -> Vec<(String, usize)> {
    let mut names = Names::default();
    let mut threads: HashMap<u32, String> = HashMap::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for stack in &samples.stacks {
        let mut frames: Vec<String> = Vec::new();
        // Innermost first: the unwinder, the handler, the kernel's signal trampoline, then
        // the interrupted code. Only what follows the trampoline is the program's.
        let handler = stack.frames.iter().position(|&ip| {
            names
                .get(ip, false)
                .iter()
                .any(|n| n.ends_with(sampler::HANDLER_NAME))
        });
        let start = handler.map_or(0, |i| i + 2).min(stack.frames.len());
        let mut line = threads
            .entry(stack.thread)
            .or_insert_with(|| thread_name(stack.thread))
            .clone();
        for (i, &ip) in stack.frames[start..].iter().enumerate() {
            // A return address points after its call: look up the call itself, except for
            // the interrupted instruction.
            frames.extend_from_slice(names.get(ip, i == 0));
        }
        for name in frames.iter().rev() {
            line.push(';');
            line.push_str(name);
        }
        *counts.entry(line).or_default() += 1;
    }
    let mut folded: Vec<(String, usize)> = counts.into_iter().collect();
    folded.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    folded
}

/// Frame names by address, innermost inlined function first, each looked up once.
#[derive(Default)]
struct Names(HashMap<(usize, bool), Vec<String>>);

impl Names {
    fn get(&mut self, ip: usize, exact: bool) -> &[String] {
        self.0.entry((ip, exact)).or_insert_with(|| {
            let lookup = if exact { ip } else { ip.saturating_sub(1) };
            let mut found = Vec::new();
            backtrace::resolve(lookup as *mut std::ffi::c_void, |symbol| {
                if let Some(name) = symbol.name() {
                    // `;` separates frames in the folded format; Rust types may hold one.
                    found.push(format!("{name:#}").replace(';', ","));
                }
            });
            if found.is_empty() {
                found.push(format!("{ip:#x}"));
            }
            found
        })
    }
}

fn thread_name(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|n| n.trim_end().replace(';', ","))
        .unwrap_or_else(|_| format!("thread {tid}"))
}
