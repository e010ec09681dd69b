//! The plain path: requests without a token, proxied as streams (being written).
