//! Column specifications: which column of a CSV or binary trace holds which
//! request field, for the [`Format::Csv`](crate::Format::Csv) and
//! [`Format::Binary`](crate::Format::Binary) readers.
//!
//! libCacheSim's `-t` syntax is read as it is —
//! `time-col=1, obj-id-col=2, obj-size-col=3, delimiter=,, has-header=true`,
//! binary `obj-id-col=2, format=<IQI` — and so is a shorter Hearth spelling of
//! the same keys: `time=1,id=2,size=3,sep=tab,header`. Pairs are separated
//! by commas; a value runs to the next comma, so `delimiter=,` followed by a
//! comma (`delimiter=,,`) means a comma, as in libCacheSim.

use std::fmt;
use std::str::FromStr;

use crate::error::SettingError;

/// The request fields a column can hold, with the key naming each in
/// messages (libCacheSim's spelling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Id,
    Time,
    Size,
    Op,
    Client,
}

impl Field {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Field::Id => "obj-id-col",
            Field::Time => "time-col",
            Field::Size => "obj-size-col",
            Field::Op => "op-col",
            Field::Client => "tenant-col",
        }
    }
}

/// A column specification (see the module documentation). Columns are
/// numbered from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Columns {
    /// The object id's column (required).
    pub id: usize,
    /// Timestamp in seconds (decimals allowed in CSV).
    pub time: Option<usize>,
    /// Object size in bytes; without it every object has size 1.
    pub size: Option<usize>,
    /// Operation: `read`/`get`, `write`/`set`, `delete` (CSV), or
    /// libCacheSim's operation code (binary).
    pub op: Option<usize>,
    /// Tenant, taken as the request's client.
    pub client: Option<usize>,
    /// CSV field separator (default `,`).
    pub delimiter: u8,
    /// Whether a CSV's first line is a header; `None`: guessed as libCacheSim
    /// does (a header when the line has no more digits than letters).
    pub header: Option<bool>,
    /// CSV ids: `Some(true)` numbers only, `Some(false)` always hashed as
    /// text, `None` a number when the field reads as one, else hashed.
    pub id_is_num: Option<bool>,
    /// A binary trace's record layout (`format=<IQI`).
    pub layout: Option<Layout>,
}

impl Columns {
    /// The columns in use with their fields, for reading and checking.
    pub(crate) fn used(&self) -> impl Iterator<Item = (Field, usize)> + '_ {
        let optional =
            [(Field::Time, self.time), (Field::Size, self.size), (Field::Op, self.op), (Field::Client, self.client)];
        std::iter::once((Field::Id, self.id)).chain(optional.into_iter().filter_map(|(f, c)| c.map(|c| (f, c))))
    }
}

/// One field of a binary record, as Python's `struct` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    /// `x`: a pad byte, read by no column.
    Pad,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl FieldType {
    fn from_char(c: char) -> Option<FieldType> {
        Some(match c {
            'x' => FieldType::Pad,
            'b' | 'c' => FieldType::I8,
            'B' | '?' => FieldType::U8,
            'h' => FieldType::I16,
            'H' => FieldType::U16,
            'i' | 'l' => FieldType::I32,
            'I' | 'L' => FieldType::U32,
            'q' => FieldType::I64,
            'Q' => FieldType::U64,
            'f' => FieldType::F32,
            'd' => FieldType::F64,
            _ => return None,
        })
    }

    pub(crate) fn len(self) -> usize {
        match self {
            FieldType::Pad | FieldType::I8 | FieldType::U8 => 1,
            FieldType::I16 | FieldType::U16 => 2,
            FieldType::I32 | FieldType::U32 | FieldType::F32 => 4,
            FieldType::I64 | FieldType::U64 | FieldType::F64 => 8,
        }
    }
}

/// A binary record layout: `<` (little-endian, also the default) or `>`/`!`
/// (big-endian), then one `struct` character per field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    text: String,
    pub(crate) big_endian: bool,
    pub(crate) fields: Vec<FieldType>,
    /// Byte offset of each field in the record.
    pub(crate) offsets: Vec<usize>,
}

impl Layout {
    /// Bytes in one record.
    pub fn record_len(&self) -> usize {
        self.fields.iter().map(|f| f.len()).sum()
    }

    /// Reads field `column` (1-based) of `record` as a number: an integer,
    /// or a float truncated toward zero (as libCacheSim does).
    pub(crate) fn read(&self, record: &[u8], column: usize) -> Result<i128, String> {
        let (kind, at) = (self.fields[column - 1], self.offsets[column - 1]);
        let bytes = &record[at..at + kind.len()];
        let mut word = [0u8; 8];
        if self.big_endian {
            word[8 - bytes.len()..].copy_from_slice(bytes);
            word.reverse();
        } else {
            word[..bytes.len()].copy_from_slice(bytes);
        }
        let raw = u64::from_le_bytes(word);
        let float = |v: f64| {
            if v.is_finite() {
                Ok(v.trunc() as i128)
            } else {
                Err(format!("{v} is not a finite number"))
            }
        };
        Ok(match kind {
            FieldType::Pad => unreachable!("a pad byte is never a column"),
            FieldType::I8 => i128::from(raw as u8 as i8),
            FieldType::I16 => i128::from(raw as u16 as i16),
            FieldType::I32 => i128::from(raw as u32 as i32),
            FieldType::I64 => i128::from(raw as i64),
            FieldType::U8 | FieldType::U16 | FieldType::U32 | FieldType::U64 => i128::from(raw),
            FieldType::F32 => float(f64::from(f32::from_bits(raw as u32)))?,
            FieldType::F64 => float(f64::from_bits(raw))?,
        })
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Layout {
    type Err = String;
    fn from_str(text: &str) -> Result<Layout, String> {
        let (big_endian, chars) = match text.chars().next() {
            Some('<') => (false, &text[1..]),
            Some('>' | '!') => (true, &text[1..]),
            Some('@' | '=') => return Err("native byte order is not supported: start the format with < or >".into()),
            _ => (false, text),
        };
        let mut fields = Vec::new();
        for c in chars.chars() {
            let field = FieldType::from_char(c).ok_or_else(|| {
                format!("{c:?} is not a field type (one of x b B c ? h H i I l L q Q f d, one per field)")
            })?;
            fields.push(field);
        }
        if fields.is_empty() {
            return Err("no fields".into());
        }
        let offsets = fields.iter().scan(0, |at, f| Some(std::mem::replace(at, *at + f.len()))).collect();
        Ok(Layout { text: text.to_string(), big_endian, fields, offsets })
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "" | "true" | "1" | "yes" | "y" => Some(true),
        "false" | "0" | "no" | "n" => Some(false),
        _ => None,
    }
}

fn parse_delimiter(value: &str) -> Option<u8> {
    Some(match value.to_ascii_lowercase().as_str() {
        // `delimiter=,,` leaves the value empty: libCacheSim takes a comma.
        "" | "\\" | "\\," | "comma" => b',',
        "\\t" | "tab" => b'\t',
        "space" => b' ',
        "semicolon" => b';',
        "pipe" => b'|',
        _ if value.len() == 1 && value.is_ascii() => value.as_bytes()[0],
        _ => return None,
    })
}

impl FromStr for Columns {
    type Err = SettingError;
    fn from_str(spec: &str) -> Result<Columns, SettingError> {
        let bad = |problem: String| SettingError::Columns { spec: spec.to_string(), problem };
        let mut columns = Columns {
            id: 0,
            time: None,
            size: None,
            op: None,
            client: None,
            delimiter: b',',
            header: None,
            id_is_num: None,
            layout: None,
        };
        let mut rest = spec;
        while !rest.trim().is_empty() {
            let (pair, after) = match rest.find('=') {
                // The value runs to the next comma, whatever it holds (`delimiter=,,`).
                Some(eq) => match rest[eq + 1..].find(',') {
                    Some(comma) => rest.split_at(eq + 1 + comma),
                    None => (rest, ""),
                },
                None => match rest.find(',') {
                    Some(comma) => rest.split_at(comma),
                    None => (rest, ""),
                },
            };
            rest = after.trim_start_matches([' ', ',']);
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (key, value) = (key.trim().to_ascii_lowercase().replace('_', "-"), value.trim());
            let column = |value: &str| -> Result<Option<usize>, SettingError> {
                match value.parse::<usize>() {
                    Ok(0) => Err(bad(format!("{key}=0: columns are numbered from 1"))),
                    Ok(n) => Ok(Some(n)),
                    Err(_) => Err(bad(format!("{key}={value:?}: expected a column number (from 1)"))),
                }
            };
            match key.as_str() {
                "obj-id-col" | "id-col" | "id" => columns.id = column(value)?.expect("a column"),
                "time-col" | "time" => columns.time = column(value)?,
                "obj-size-col" | "size-col" | "size" => columns.size = column(value)?,
                "op-col" | "op" => columns.op = column(value)?,
                "tenant-col" | "client" | "tenant" => columns.client = column(value)?,
                "delimiter" | "sep" => {
                    columns.delimiter = parse_delimiter(value).ok_or_else(|| {
                        bad(format!("{key}={value:?}: expected one character, tab, \\t, space, semicolon or pipe"))
                    })?
                }
                "has-header" | "header" => {
                    columns.header =
                        Some(parse_bool(value).ok_or_else(|| bad(format!("{key}={value:?}: expected true or false")))?)
                }
                "obj-id-is-num" | "id-is-num" => {
                    columns.id_is_num =
                        Some(parse_bool(value).ok_or_else(|| bad(format!("{key}={value:?}: expected true or false")))?)
                }
                "format" | "layout" => {
                    columns.layout = Some(value.parse().map_err(|why| bad(format!("{key}={value:?}: {why}")))?)
                }
                // Read by libCacheSim for what Hearth does not model (costs,
                // TTLs, learned policies' features): accepted, not used.
                "obj-cost-col" | "cost-col" | "ttl-col" | "feature-cols" => {}
                _ => {
                    return Err(bad(format!(
                        "unknown key {key:?}; known: obj-id-col (id), time-col (time), obj-size-col (size), \
                         op-col (op), tenant-col (client), delimiter (sep), has-header (header), \
                         obj-id-is-num, format"
                    )))
                }
            }
        }
        if columns.id == 0 {
            return Err(bad("no object-id column: give obj-id-col=N (or id=N)".into()));
        }
        if let Some(layout) = &columns.layout {
            let n = layout.fields.len();
            for (field, column) in columns.used() {
                if column > n {
                    return Err(bad(format!("{}={column} is past the {n} fields of format {layout}", field.key())));
                }
                if layout.fields[column - 1] == FieldType::Pad {
                    return Err(bad(format!("{}={column} names a pad byte (x) of format {layout}", field.key())));
                }
            }
        }
        Ok(columns)
    }
}

impl fmt::Display for Columns {
    /// libCacheSim's spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs: Vec<String> = self.used().map(|(field, c)| format!("{}={c}", field.key())).collect();
        match &self.layout {
            Some(layout) => pairs.push(format!("format={layout}")),
            None => {
                pairs.push(match self.delimiter {
                    b'\t' => "delimiter=\\t".into(),
                    b',' => "delimiter=,".into(),
                    d => format!("delimiter={}", d as char),
                });
                if let Some(h) = self.header {
                    pairs.push(format!("has-header={h}"));
                }
            }
        }
        if let Some(n) = self.id_is_num {
            pairs.push(format!("obj-id-is-num={n}"));
        }
        // `delimiter=,` then `, ` reads back as libCacheSim's `delimiter=,, `.
        f.write_str(&pairs.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libcachesim_and_hearth_spellings_mean_the_same() {
        let theirs: Columns = "time-col=1, obj-id-col=2, obj-size-col=3, delimiter=,, has-header=true".parse().unwrap();
        let ours: Columns = "time=1,id=2,size=3,sep=comma,header".parse().unwrap();
        assert_eq!(theirs, ours);
        assert_eq!(
            (theirs.id, theirs.time, theirs.size, theirs.delimiter, theirs.header),
            (2, Some(1), Some(3), b',', Some(true))
        );
        let tab: Columns = "obj_id_col=1,delimiter=\\t".parse().unwrap();
        assert_eq!(tab.delimiter, b'\t');
        assert_eq!("id=1,sep=tab".parse::<Columns>().unwrap().delimiter, b'\t');
        // Shown in libCacheSim's spelling, which reads back the same.
        for c in [theirs, tab] {
            assert_eq!(c.to_string().parse::<Columns>().unwrap(), c, "{c}");
        }
    }

    #[test]
    fn binary_layouts_give_offsets_and_sizes() {
        let c: Columns = "time-col=1, obj-id-col=2, obj-size-col=3, format=<IQIHB".parse().unwrap();
        let layout = c.layout.unwrap();
        assert_eq!(layout.record_len(), 19);
        assert_eq!(layout.offsets, vec![0, 4, 12, 16, 18]);
        let mut record = vec![0u8; 19];
        record[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        record[18] = 0xff;
        assert_eq!(layout.read(&record, 2), Ok(i128::from(u64::MAX)));
        assert_eq!(layout.read(&record, 5), Ok(255));
        let signed: Layout = ">hd".parse().unwrap();
        let mut r = (-2i16).to_be_bytes().to_vec();
        r.extend(2.75f64.to_be_bytes());
        assert_eq!((signed.read(&r, 1), signed.read(&r, 2)), (Ok(-2), Ok(2)));
    }

    #[test]
    fn bad_specifications_say_what_and_where() {
        let err = |s: &str| s.parse::<Columns>().unwrap_err().to_string();
        assert_eq!(
            err("time-col=1"),
            r#"column specification "time-col=1": no object-id column: give obj-id-col=N (or id=N)"#
        );
        assert!(err("obj-id-col=0").ends_with("obj-id-col=0: columns are numbered from 1"), "{}", err("obj-id-col=0"));
        assert!(err("obj-id-col=two").contains(r#"obj-id-col="two": expected a column number"#));
        assert!(err("obj-id-col=2,colour=red").contains(r#"unknown key "colour""#));
        assert!(err("obj-id-col=7,format=<IIIHB").ends_with("obj-id-col=7 is past the 5 fields of format <IIIHB"));
        assert!(err("obj-id-col=1,format=<Iz").contains("'z' is not a field type"));
        assert!(err("obj-id-col=1,format=<xI").contains("obj-id-col=1 names a pad byte"));
        assert!(err("obj-id-col=1,delimiter=ab").contains("expected one character"));
        assert!(err("obj-id-col=1,has-header=maybe").contains("expected true or false"));
        assert!(!err("obj-id-col=1,format=@I").contains('\n'));
    }
}
