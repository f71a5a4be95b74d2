//! Property tests (fuzzing) of the trace parsers: arbitrary input never panics, errors
//! name where they are, and the binary form round-trips any event stream exactly as far
//! as cachegrind's counters can tell.

use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, LackeyReader, ReplayError, TraceEvent};
use cachesched_sim::trace::{replay_binary, replay_binary_slice, TraceReader, TraceWriter, MAGIC};
use proptest::prelude::*;

fn event() -> impl Strategy<Value = TraceEvent> {
    let addr = prop_oneof![
        0u64..0x1_0000,
        0x40_0000u64..0x40_1000,
        any::<u64>().prop_map(|a| a >> 17)
    ];
    let size = prop_oneof![1u64..16, 16u64..64];
    (0u8..5, addr, size).prop_map(|(k, addr, size)| match k {
        0 | 1 => TraceEvent::Instr {
            addr,
            size: size.min(15),
        },
        2 => TraceEvent::Load { addr, size },
        3 => TraceEvent::Store { addr, size },
        _ => TraceEvent::Modify { addr, size },
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn lackey_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut r = LackeyReader::new(&bytes[..]);
        loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(ReplayError::Malformed { line, .. }) => {
                    prop_assert!(line >= 1);
                    break;
                }
                Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e}"))),
            }
        }
    }

    #[test]
    fn lackey_like_lines_never_panic(lines in proptest::collection::vec("(I  |[ LSMX]{2} )[0-9a-fA-Fz]{0,18},[0-9]{0,4}", 0..30)) {
        let text = lines.join("\n");
        let mut r = LackeyReader::new(text.as_bytes());
        while let Ok(Some(_)) = r.next_event() {}
    }

    #[test]
    fn binary_reader_never_panics(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&body);
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(ReplayError::MalformedBinary { offset, .. }) => {
                    prop_assert!(offset >= 8 && offset <= bytes.len() as u64);
                    break;
                }
                Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e}"))),
            }
        }
        // the fused replay loop must not panic on garbage either
        let g = parse_cg_cache("I1", "1024,2,64").unwrap();
        let mut sim = CgSim::new(g, g, g).unwrap();
        let _ = replay_binary(&mut sim, &bytes[..]);
        let mut sim2 = CgSim::new(g, g, g).unwrap();
        let _ = replay_binary_slice(&mut sim2, &bytes);
    }

    #[test]
    fn binary_round_trip_preserves_counters(events in proptest::collection::vec(event(), 0..300)) {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for &e in &events {
            w.write(e).unwrap();
        }
        let bytes = w.finish().unwrap();
        for cfg in ["1024,2,16", "4096,4,64", "2048,1,32"] {
            let g = parse_cg_cache("I1", cfg).unwrap();
            let mut a = CgSim::new(g, g, g).unwrap();
            for &e in &events {
                a.event(e);
            }
            let mut b = CgSim::new(g, g, g).unwrap();
            replay_binary(&mut b, &bytes[..]).unwrap();
            prop_assert_eq!(a.counts, b.counts);
            let mut c = CgSim::new(g, g, g).unwrap();
            replay_binary_slice(&mut c, &bytes).unwrap();
            prop_assert_eq!(a.counts, c.counts);
        }
    }
}
