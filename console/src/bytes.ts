// Bytes in an ArrayBuffer (what fetch, Web Crypto and Blob take).
export type Bytes = Uint8Array<ArrayBuffer>;
