//! Arbitrary bytes never panic the decoders, and every option reply stream
//! the negotiation produces is well formed.

use hearth_nbd::handshake::{ExportInfo, Negotiation, OptionHeader, Outcome};
use hearth_nbd::{tflags, Request, Session, REPLY_MAGIC};
use proptest::prelude::*;

fn exports() -> Vec<ExportInfo> {
    vec![ExportInfo {
        name: "disk".into(),
        description: "d".into(),
        size: 1 << 30,
        flags: tflags::SEND_FLUSH,
        min_block: 1,
        preferred_block: 4096,
        max_block: 32 << 20,
    }]
}

/// Walks a reply stream: every reply has the magic, the option it answers
/// and a length that fits. Returns how many replies it held.
fn well_formed(mut b: &[u8], option: u32) -> usize {
    let mut n = 0;
    while !b.is_empty() {
        assert!(b.len() >= 20, "truncated reply header");
        assert_eq!(b[..8], REPLY_MAGIC.to_be_bytes());
        assert_eq!(u32::from_be_bytes(b[8..12].try_into().unwrap()), option);
        let len = u32::from_be_bytes(b[16..20].try_into().unwrap()) as usize;
        assert!(b.len() >= 20 + len, "reply data shorter than its length");
        b = &b[20 + len..];
        n += 1;
    }
    n
}

proptest! {
    #[test]
    fn options_with_arbitrary_data_get_well_formed_replies(
        option in prop_oneof![1u32..=12, any::<u32>()],
        data in proptest::collection::vec(any::<u8>(), 0..300),
        structured_first in any::<bool>(),
    ) {
        let mut n = Negotiation::new([0, 0, 0, 3]).unwrap();
        let mut out = Vec::new();
        if structured_first {
            n.handle(OptionHeader { option: 8, length: 0 }, &[], &exports(), &mut out);
            out.clear();
        }
        let outcome = n.handle(OptionHeader { option, length: data.len() as u32 }, &data, &exports(), &mut out);
        if option == 1 {
            // EXPORT_NAME answers with raw export data or closes.
            prop_assert!(out.is_empty() || out.len() == 10);
        } else {
            let replies = well_formed(&out, option);
            prop_assert!(replies >= 1, "every option other than EXPORT_NAME gets a reply");
            prop_assert!(matches!(outcome, Outcome::Continue | Outcome::Close | Outcome::Transmit(_)));
        }
    }

    #[test]
    fn request_headers_decode_and_validate_without_panicking(bytes in proptest::array::uniform28(any::<u8>()), magic in any::<bool>()) {
        let mut b = bytes;
        if magic {
            b[..4].copy_from_slice(&0x2560_9513u32.to_be_bytes());
        }
        if let Ok(r) = Request::decode(&b) {
            let session = Session { export: 0, flags: tflags::HAS_FLAGS | tflags::SEND_DF, structured_replies: true, base_allocation: Some(1), hints: false };
            let ok = r.validate(&session, 1 << 30, 32 << 20).is_ok();
            if ok {
                prop_assert!(r.offset.checked_add(u64::from(r.length)).is_some_and(|e| e <= 1 << 30) || matches!(r.command, hearth_nbd::Command::Flush | hearth_nbd::Command::Disc));
            }
        } else {
            prop_assert!(!magic);
        }
    }

    #[test]
    fn option_headers_never_accept_oversized_data(bytes in proptest::array::uniform16(any::<u8>())) {
        let mut b = bytes;
        b[..8].copy_from_slice(b"IHAVEOPT");
        match OptionHeader::decode(&b) {
            Ok(h) => prop_assert!(h.length <= hearth_nbd::handshake::MAX_OPTION_DATA),
            Err(_) => prop_assert!(u32::from_be_bytes(b[12..16].try_into().unwrap()) > hearth_nbd::handshake::MAX_OPTION_DATA),
        }
    }
}
