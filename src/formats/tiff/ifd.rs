//! TIFF's building blocks, shared by the TIFF views: the byte order, IFD entries, the
//! classic and BigTIFF flavours, and a writer of an IFD that keeps its own values right
//! after its entries.

use crate::formats::scalar::Scalar;

pub const ASCII: u16 = 2;
pub const SHORT: u16 = 3;
pub const LONG: u16 = 4;
pub const DOUBLE: u16 = 12;
pub const LONG8: u16 = 16;

/// BitsPerSample and SampleFormat of an element (a bool is a byte).
pub fn sample(scalar: Scalar) -> (u16, u16) {
    let bits = scalar.size() as u16 * 8;
    let format = match scalar {
        Scalar::Bool | Scalar::UInt(_) => 1,
        Scalar::Int(_) => 2,
        Scalar::Float(_) => 3,
        Scalar::Complex(_) => 6,
    };
    (bits, format)
}

/// Numbers in the file's byte order.
#[derive(Clone, Copy)]
pub struct Endian {
    pub big_endian: bool,
}

impl Endian {
    fn put<const N: usize>(self, out: &mut Vec<u8>, le: [u8; N], be: [u8; N]) {
        out.extend_from_slice(if self.big_endian { &be } else { &le });
    }
    pub fn u16s(self, values: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            self.put(&mut out, v.to_le_bytes(), v.to_be_bytes());
        }
        out
    }
    pub fn u32(self, v: u32) -> Vec<u8> {
        let mut out = Vec::new();
        self.put(&mut out, v.to_le_bytes(), v.to_be_bytes());
        out
    }
    pub fn u64(self, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        self.put(&mut out, v.to_le_bytes(), v.to_be_bytes());
        out
    }
    pub fn f64s(self, values: &[f64]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            self.put(&mut out, v.to_le_bytes(), v.to_be_bytes());
        }
        out
    }
    /// A TIFF's first bytes: the byte order mark, the flavour's magic and the offset of
    /// the first IFD.
    pub fn file_header(self, f: Flavour, first_ifd: u64) -> Vec<u8> {
        let mut out = if self.big_endian { b"MM" } else { b"II" }.to_vec();
        if f.big {
            out.extend(self.u16s(&[43, 8, 0]));
            out.extend(self.u64(first_ifd));
        } else {
            out.extend(self.u16s(&[42]));
            out.extend(self.u32(first_ifd as u32));
        }
        out
    }
}

/// One IFD entry: its value's bytes in the file's order.
#[derive(Clone)]
pub struct Tag {
    pub tag: u16,
    pub kind: u16,
    pub count: u64,
    pub bytes: Vec<u8>,
}

impl Tag {
    pub fn short(o: Endian, tag: u16, values: &[u16]) -> Tag {
        Tag {
            tag,
            kind: SHORT,
            count: values.len() as u64,
            bytes: o.u16s(values),
        }
    }
    pub fn long(o: Endian, tag: u16, v: u32) -> Tag {
        Tag {
            tag,
            kind: LONG,
            count: 1,
            bytes: o.u32(v),
        }
    }
    pub fn doubles(o: Endian, tag: u16, values: &[f64]) -> Tag {
        Tag {
            tag,
            kind: DOUBLE,
            count: values.len() as u64,
            bytes: o.f64s(values),
        }
    }
    /// Text with its terminating NUL.
    pub fn ascii(tag: u16, text: &str) -> Tag {
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        Tag {
            tag,
            kind: ASCII,
            count: bytes.len() as u64,
            bytes,
        }
    }
    /// An offset or byte count: LONG in TIFF, LONG8 in BigTIFF.
    pub fn word(o: Endian, big: bool, tag: u16, v: u64) -> Tag {
        Tag::words(o, big, tag, [v])
    }
    /// Offsets or byte counts (the caller checks that a classic TIFF's fit 32 bits).
    pub fn words(o: Endian, big: bool, tag: u16, values: impl IntoIterator<Item = u64>) -> Tag {
        let mut bytes = Vec::new();
        let mut count = 0;
        for v in values {
            bytes.extend(if big { o.u64(v) } else { o.u32(v as u32) });
            count += 1;
        }
        Tag {
            tag,
            kind: if big { LONG8 } else { LONG },
            count,
            bytes,
        }
    }
}

/// Sizes of the two flavours' structures.
#[derive(Clone, Copy)]
pub struct Flavour {
    pub big: bool,
}

impl Flavour {
    pub fn header(self) -> u64 {
        if self.big {
            16
        } else {
            8
        }
    }
    pub fn entry(self) -> u64 {
        if self.big {
            20
        } else {
            12
        }
    }
    /// The entry count before and the next-IFD offset after the entries.
    pub fn frame(self) -> u64 {
        if self.big {
            16
        } else {
            6
        }
    }
    pub fn ifd(self, entries: usize) -> u64 {
        self.frame() + self.entry() * entries as u64
    }
    /// Values that fit in an entry are stored in it.
    pub fn inline(self) -> u64 {
        if self.big {
            8
        } else {
            4
        }
    }
    /// An offset or count in the flavour's width.
    pub fn word(self, o: Endian, v: u64) -> Vec<u8> {
        if self.big {
            o.u64(v)
        } else {
            o.u32(v as u32)
        }
    }

    /// Where the values of `tags` go in an IFD at `at` that keeps them after its
    /// entries (0: in the entry), and where the IFD's block ends.
    pub fn own_values(self, at: u64, tags: &[Tag]) -> (Vec<u64>, u64) {
        let mut end = at + self.ifd(tags.len());
        let places = tags
            .iter()
            .map(|t| {
                let len = t.bytes.len() as u64;
                if len > self.inline() {
                    end = end.next_multiple_of(8);
                    let place = end;
                    end += len;
                    place
                } else {
                    0
                }
            })
            .collect();
        (places, end)
    }

    /// Write at `at` (padding `out` up to it) an IFD of `tags` (in ascending order)
    /// followed by its own values, pointing to the IFD at `next` (0: none).
    pub fn write_ifd(self, o: Endian, out: &mut Vec<u8>, at: u64, tags: &[Tag], next: u64) {
        let (places, _) = self.own_values(at, tags);
        out.resize(at as usize, 0);
        if self.big {
            out.extend(o.u64(tags.len() as u64));
        } else {
            out.extend(o.u16s(&[tags.len() as u16]));
        }
        for (t, &place) in tags.iter().zip(&places) {
            out.extend(o.u16s(&[t.tag, t.kind]));
            out.extend(self.word(o, t.count));
            let start = out.len();
            if place == 0 {
                out.extend_from_slice(&t.bytes);
            } else {
                out.extend(self.word(o, place));
            }
            out.resize(start + self.inline() as usize, 0);
        }
        out.extend(self.word(o, next));
        for (t, &place) in tags.iter().zip(&places) {
            if place != 0 {
                out.resize(place as usize, 0);
                out.extend_from_slice(&t.bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ifd_keeps_long_values_after_its_entries_on_8_byte_boundaries() {
        let o = Endian { big_endian: false };
        let f = Flavour { big: false };
        let tags = [
            Tag::long(o, 256, 7),
            Tag::ascii(270, "hello world"),
            Tag::words(o, false, 324, [1, 2, 3]),
        ];
        let (places, end) = f.own_values(8, &tags);
        let entries_end = 8 + 6 + 12 * 3;
        assert_eq!(places[0], 0);
        assert_eq!(places[1], (entries_end as u64).next_multiple_of(8));
        assert_eq!(places[2], (places[1] + 12).next_multiple_of(8));
        assert_eq!(end, places[2] + 12);
        let mut out = o.file_header(f, 8);
        f.write_ifd(o, &mut out, 8, &tags, 0);
        assert_eq!(out.len() as u64, end);
        assert_eq!(&out[places[1] as usize..][..12], b"hello world\0");
        assert_eq!(u16::from_le_bytes([out[8], out[9]]), 3);
        let first = 10;
        assert_eq!(
            u32::from_le_bytes(out[first + 8..first + 12].try_into().unwrap()),
            7
        );
    }
}
