/**
 * The graphmem version whose schema.graphql the client's types were generated from (the
 * package's version too): named, with the server's, when a server does not know a request.
 */
export const CLIENT_VERSION = '0.3.0';
