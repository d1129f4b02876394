/**
 * The DynamoDB document client the AWS stores are built on, as a type: deps objects outside core/aws name it from here,
 * so no file of the core outside its AWS implementation imports the SDK.
 */
export type { DynamoDBDocumentClient as DocumentClient } from '@aws-sdk/lib-dynamodb';

/** An attribute in DynamoDB's wire form (`{ S: 'inv#1' }`, `{ N: '100' }`), as a type: the fenced batch's items are sent in it. */
export type { AttributeValue } from '@aws-sdk/client-dynamodb';

/** A plain document value as the document client takes it (`'inv#1'`, `100`, `{ lines: [...] }`): the writer's items. */
export type { NativeAttributeValue } from '@aws-sdk/util-dynamodb';
