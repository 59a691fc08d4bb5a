//! The plain numeric element types image formats can name: what each header format maps
//! from. Everything else (datetimes, text, structs, raw bytes) has no image type.

use crate::metadata::DataType;

/// A numeric element; sizes in bytes (for complex, of the whole pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// One byte, 0 or 1: images show it as uint8.
    Bool,
    Int(usize),
    UInt(usize),
    Float(usize),
    Complex(usize),
}

impl Scalar {
    pub fn of(dtype: &DataType) -> Result<Scalar, String> {
        Ok(match dtype {
            DataType::Bool => Scalar::Bool,
            DataType::Int(n @ (1 | 2 | 4 | 8)) => Scalar::Int(*n),
            DataType::UInt(n @ (1 | 2 | 4 | 8)) => Scalar::UInt(*n),
            DataType::Float(n @ (2 | 4 | 8)) => Scalar::Float(*n),
            DataType::Complex(n @ (8 | 16)) => Scalar::Complex(*n),
            other => return Err(format!("no image type for {}", other.name())),
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Scalar::Bool => 1,
            Scalar::Int(n) | Scalar::UInt(n) | Scalar::Float(n) | Scalar::Complex(n) => n,
        }
    }

    /// The numpy-style name, for messages.
    pub fn name(self) -> String {
        match self {
            Scalar::Bool => "bool".into(),
            Scalar::Int(n) => format!("int{}", n * 8),
            Scalar::UInt(n) => format!("uint{}", n * 8),
            Scalar::Float(n) => format!("float{}", n * 8),
            Scalar::Complex(n) => format!("complex{}", n * 8),
        }
    }

    /// The format's `no type for ...` reason.
    pub fn unsupported(self, format: &str) -> String {
        format!("{format} has no type for {}", self.name())
    }
}
