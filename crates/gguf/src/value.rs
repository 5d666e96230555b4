//! Metadata values and the key → value table of one file.

use std::collections::HashMap;

use crate::types::ValueType;

/// One metadata value.
///
/// Arrays keep their elements only when they are small (see
/// [`Array::values`]); large ones such as the tokenizer's 262,144 tokens are
/// walked over and kept as a type and a length.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// A string; bytes that are not UTF-8 are replaced (U+FFFD).
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
    /// A string longer than the reader keeps (its length in bytes).
    LongString(u64),
}

/// An array value: its element type, its length, and its elements when kept.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub elem_type: ValueType,
    pub len: u64,
    /// The elements, or `None` when the array was skipped: numeric arrays
    /// over [`MAX_KEPT_ARRAY`] elements, string arrays over
    /// [`MAX_KEPT_STRING_ARRAY`] elements or holding a string over
    /// [`MAX_KEPT_ARRAY_STRING`] bytes.
    pub values: Option<Vec<Value>>,
}

/// Numeric and bool arrays up to this many elements are kept (per-layer
/// hyperparameters have one element per layer).
pub const MAX_KEPT_ARRAY: u64 = 4096;
/// String arrays up to this many elements are kept (e.g. `general.tags`).
pub const MAX_KEPT_STRING_ARRAY: u64 = 256;
/// Strings inside kept string arrays must be at most this long.
pub const MAX_KEPT_ARRAY_STRING: u64 = 4096;
/// String values up to this many bytes are kept (chat templates fit).
pub const MAX_KEPT_STRING: u64 = 1 << 20;

impl Value {
    /// The GGUF type of the value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) | Value::LongString(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value as a signed integer, for any integer type that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::I8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a `u32`, for any integer type whose value fits.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_i64().and_then(|v| u32::try_from(v).ok())
    }

    /// The value as a `u64`, for any non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            _ => self.as_i64().and_then(|v| u64::try_from(v).ok()),
        }
    }

    /// The value as a float, for float types.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string (kept strings only).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The metadata of one file in file order, with lookup by key.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Adds an entry; returns false (and keeps the first) when the key is
    /// already present.
    pub(crate) fn insert(&mut self, key: String, value: Value) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        true
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).and_then(|&i| self.entries.get(i)).map(|(_, v)| v)
    }

    /// True when `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// All entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A kept string value.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// An integer value that fits in a `u32`.
    pub fn get_u32(&self, key: &str) -> Option<u32> {
        self.get(key).and_then(Value::as_u32)
    }

    /// A bool value.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_views_check_range() {
        assert_eq!(Value::I32(-1).as_u32(), None);
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::U64(u64::MAX).as_u64(), Some(u64::MAX));
        assert_eq!(Value::U16(7).as_u32(), Some(7));
        assert_eq!(Value::F32(1.0).as_u32(), None);
    }

    #[test]
    fn metadata_keeps_first_of_duplicates() {
        let mut m = Metadata::default();
        assert!(m.insert("a".into(), Value::U32(1)));
        assert!(!m.insert("a".into(), Value::U32(2)));
        assert_eq!(m.get_u32("a"), Some(1));
        assert_eq!(m.len(), 1);
    }
}
