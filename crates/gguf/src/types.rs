//! The ggml tensor types and llama.cpp's file-type names.
//!
//! The tables follow ggml/src/ggml.c (`type_traits`: block size and bytes per
//! block) and include/llama.h with `llama_ftype_name` in
//! src/llama-model-loader.cpp. Ids that ggml removed or added after these
//! tables were written are reported as unknown, not as a corrupt file.

use std::fmt;

/// Block size and bytes per block of one ggml tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// ggml's own name, as llama.cpp prints it (`q4_K`, `f16`, ...).
    pub name: &'static str,
    /// Elements per block.
    pub block_size: u64,
    /// Bytes per block.
    pub type_size: u64,
}

/// (id, name, elements per block, bytes per block), from ggml's `type_traits`.
const GGML_TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 18),
    (3, "q4_1", 32, 20),
    (6, "q5_0", 32, 22),
    (7, "q5_1", 32, 24),
    (8, "q8_0", 32, 34),
    (9, "q8_1", 32, 36),
    (10, "q2_K", 256, 84),
    (11, "q3_K", 256, 110),
    (12, "q4_K", 256, 144),
    (13, "q5_K", 256, 176),
    (14, "q6_K", 256, 210),
    (15, "q8_K", 256, 292),
    (16, "iq2_xxs", 256, 66),
    (17, "iq2_xs", 256, 74),
    (18, "iq3_xxs", 256, 98),
    (19, "iq1_s", 256, 50),
    (20, "iq4_nl", 32, 18),
    (21, "iq3_s", 256, 110),
    (22, "iq2_s", 256, 82),
    (23, "iq4_xs", 256, 136),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", 256, 56),
    (30, "bf16", 1, 2),
    (34, "tq1_0", 256, 54),
    (35, "tq2_0", 256, 66),
    (39, "mxfp4", 32, 17),
    (40, "nvfp4", 64, 36),
    (41, "q1_0", 128, 18),
    (42, "q2_0", 64, 18),
];

/// A ggml tensor type id as found in a file; the id may be one this crate
/// does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct GgmlType(pub u32);

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q4_1: GgmlType = GgmlType(3);
    pub const Q5_0: GgmlType = GgmlType(6);
    pub const Q5_1: GgmlType = GgmlType(7);
    pub const Q8_0: GgmlType = GgmlType(8);
    pub const IQ4_NL: GgmlType = GgmlType(20);
    pub const BF16: GgmlType = GgmlType(30);

    /// Block size and bytes, or `None` for an id not in the table.
    pub fn info(self) -> Option<TypeInfo> {
        GGML_TYPES
            .iter()
            .find(|(id, ..)| *id == self.0)
            .map(|&(_, name, block_size, type_size)| TypeInfo {
                name,
                block_size,
                type_size,
            })
    }

    /// ggml's name, or `None` for an unknown id.
    pub fn name(self) -> Option<&'static str> {
        self.info().map(|i| i.name)
    }

    /// Bytes of `n` elements of this type (`ggml_row_size`): `None` when the
    /// type is unknown, `n` is not a whole number of blocks, or it overflows.
    pub fn row_bytes(self, n: u64) -> Option<u64> {
        let info = self.info()?;
        if n % info.block_size != 0 {
            return None;
        }
        (n / info.block_size).checked_mul(info.type_size)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown type {}", self.0),
        }
    }
}

/// Marks a file type that llama.cpp guessed (include/llama.h LLAMA_FTYPE_GUESSED).
const FTYPE_GUESSED: u32 = 1024;

/// `llama_ftype` values and the names `llama_ftype_name` prints.
const FILE_TYPES: &[(u32, &str)] = &[
    (0, "all F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (7, "Q8_0"),
    (8, "Q5_0"),
    (9, "Q5_1"),
    (10, "Q2_K - Medium"),
    (11, "Q3_K - Small"),
    (12, "Q3_K - Medium"),
    (13, "Q3_K - Large"),
    (14, "Q4_K - Small"),
    (15, "Q4_K - Medium"),
    (16, "Q5_K - Small"),
    (17, "Q5_K - Medium"),
    (18, "Q6_K"),
    (19, "IQ2_XXS - 2.0625 bpw"),
    (20, "IQ2_XS - 2.3125 bpw"),
    (21, "Q2_K - Small"),
    (22, "IQ3_XS - 3.3 bpw"),
    (23, "IQ3_XXS - 3.0625 bpw"),
    (24, "IQ1_S - 1.5625 bpw"),
    (25, "IQ4_NL - 4.5 bpw"),
    (26, "IQ3_S - 3.4375 bpw"),
    (27, "IQ3_S mix - 3.66 bpw"),
    (28, "IQ2_S - 2.5 bpw"),
    (29, "IQ2_M - 2.7 bpw"),
    (30, "IQ4_XS - 4.25 bpw"),
    (31, "IQ1_M - 1.75 bpw"),
    (32, "BF16"),
    (36, "TQ1_0 - 1.69 bpw ternary"),
    (37, "TQ2_0 - 2.06 bpw ternary"),
    (38, "MXFP4 MoE"),
    (39, "NVFP4"),
    (40, "Q1_0"),
    (41, "Q2_0"),
];

/// The model's file type (`general.file_type`, llama.cpp's `llama_ftype`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FileType {
    /// The `llama_ftype` value, without the "guessed" bit.
    pub id: u32,
    /// llama.cpp's name for it ("Q4_K - Medium"), `None` when unknown.
    pub name: Option<&'static str>,
    /// True when the file has no `general.file_type` and the type was guessed
    /// from the most common tensor type, as llama.cpp's loader does.
    pub guessed: bool,
}

impl FileType {
    /// Names a `general.file_type` value from a file.
    pub fn from_id(raw: u32) -> FileType {
        let id = raw & !FTYPE_GUESSED;
        FileType {
            id,
            name: FILE_TYPES.iter().find(|(i, _)| *i == id).map(|(_, n)| *n),
            guessed: raw & FTYPE_GUESSED != 0,
        }
    }

    /// The file type llama.cpp's loader guesses when `general.file_type` is
    /// missing: the most common tensor type (first one wins a tie) mapped to
    /// a file type (src/llama-model-loader.cpp, `llama_model_loader`).
    pub fn guess<I: IntoIterator<Item = GgmlType>>(tensor_types: I) -> Option<FileType> {
        let mut counts: Vec<(GgmlType, u64)> = Vec::new();
        let mut best: Option<(GgmlType, u64)> = None;
        for ty in tensor_types {
            let n = match counts.iter_mut().find(|(t, _)| *t == ty) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push((ty, 1));
                    1
                }
            };
            match best {
                Some((_, max)) if n <= max => {}
                _ => best = Some((ty, n)),
            }
        }
        let (ty, _) = best?;
        let id = match ty.0 {
            0 => 0,
            1 => 1,
            30 => 32,
            2 => 2,
            3 => 3,
            6 => 8,
            7 => 9,
            8 => 7,
            10 => 10,
            11 => 12,
            12 => 15,
            13 => 17,
            14 => 18,
            34 => 36,
            35 => 37,
            16 => 19,
            17 => 20,
            22 => 28,
            18 => 23,
            19 => 24,
            29 => 31,
            20 => 25,
            23 => 30,
            21 => 26,
            39 => 38,
            // llama.cpp warns "unknown type" and falls back to all F32.
            _ => 0,
        };
        Some(FileType {
            guessed: true,
            ..FileType::from_id(id)
        })
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            Some(name) => f.write_str(name)?,
            None => write!(f, "unknown file type {}", self.id)?,
        }
        if self.guessed {
            f.write_str(" (guessed)")?;
        }
        Ok(())
    }
}

/// The 13 GGUF metadata value types (ggml/include/gguf.h `gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    /// The type for a GGUF type id, `None` for an unknown id.
    pub fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The GGUF type id.
    pub fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// Bytes of one value, `None` for strings and arrays (variable size).
    pub fn fixed_size(self) -> Option<u64> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The name llama.cpp's metadata dump uses (`u32`, `str`, `arr`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "str",
            ValueType::Array => "arr",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_type_round_trips_its_row_size() {
        for &(id, name, block, size) in GGML_TYPES {
            let t = GgmlType(id);
            assert_eq!(t.name(), Some(name));
            assert_eq!(t.row_bytes(block * 4), Some(size * 4));
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, 9999] {
            assert_eq!(GgmlType(removed).info(), None, "id {removed}");
        }
        assert_eq!(GgmlType::Q8_0.row_bytes(1024), Some(1088));
        assert_eq!(GgmlType::Q8_0.row_bytes(1000), None);
    }

    #[test]
    fn file_type_names_and_guess() {
        assert_eq!(FileType::from_id(15).to_string(), "Q4_K - Medium");
        assert_eq!(FileType::from_id(15 | 1024).to_string(), "Q4_K - Medium (guessed)");
        assert_eq!(FileType::from_id(99).name, None);
        let guess = FileType::guess([GgmlType::F32, GgmlType(12), GgmlType(12)]).unwrap();
        assert_eq!((guess.id, guess.guessed), (15, true));
        // A tie goes to the type seen first, as in llama.cpp's loop.
        let tie = FileType::guess([GgmlType::Q8_0, GgmlType::F16]).unwrap();
        assert_eq!(tie.id, 7);
        assert_eq!(FileType::guess([]), None);
    }

    #[test]
    fn value_type_ids_round_trip() {
        for id in 0..13 {
            assert_eq!(ValueType::from_id(id).unwrap().id(), id);
        }
        assert_eq!(ValueType::from_id(13), None);
    }
}
